/**
 * @brief A small order book with three real bugs of the kind memdump finds: a list node lost on an
 * early return, a strdup'd name never freed, and a worker thread's scratch buffer kept forever.
 */
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace demo {

struct Order {
    int id;
    double price;
    char *client;  // owned, strdup'd
    Order *next;
};

class OrderBook {
public:
    ~OrderBook() {
        while (head_ != nullptr) {
            Order *next = head_->next;
            // Bug 2: the client name is never freed.
            delete head_;
            head_ = next;
        }
    }

    bool add(int id, double price, const char *client) {
        auto *order = new Order{id, price, strdup(client), nullptr};  // allocation sites
        if (price <= 0.0) {
            std::cerr << "rejecting order " << id << " with price " << price << "\n";
            return false;  // Bug 1: the rejected order (and its name) leaks here.
        }
        order->next = head_;
        head_ = order;
        return true;
    }

private:
    Order *head_ = nullptr;
};

std::vector<char *> scratch;  // Bug 3: buffers parked here are never released.

void worker(int n) {
    char *buffer = static_cast<char *>(std::malloc(256 + n));
    std::snprintf(buffer, 256, "worker %d", n);
    scratch.push_back(buffer);
}

}  // namespace demo

int main() {
    {
        demo::OrderBook book;
        book.add(1, 10.5, "alice");
        book.add(2, -1.0, "bob");
        book.add(3, 12.0, "carol");
        book.add(4, 0.0, "dave");
    }
    std::thread t(demo::worker, 1);
    t.join();
    std::cout << "done: " << demo::scratch.size() << " scratch buffer(s)\n";
    return 0;
}
