// C++ allocation paths: operator new, std::vector growth, std::string, std::map, exceptions.
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct Node {
    std::vector<int> values;
    std::string name;
};

__attribute__((noinline)) void grow(std::vector<int>& v, int n) {
    for (int i = 0; i < n; i++) v.push_back(i);
}

__attribute__((noinline)) std::unique_ptr<Node> make_node(int n) {
    auto node = std::make_unique<Node>();
    node->name = std::string(static_cast<size_t>(n) + 40, 'x');
    grow(node->values, n);
    return node;
}

__attribute__((noinline)) int thrower(int n) {
    if (n > 0) throw std::runtime_error(std::string(64, 'e'));
    return n;
}

int main() {
    std::vector<int> v;
    grow(v, 300);
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < 5; i++) nodes.push_back(make_node(i * 10));
    std::map<int, std::string> m;
    for (int i = 0; i < 10; i++) m[i] = std::string(50, static_cast<char>('a' + i));
    int caught = 0;
    try {
        thrower(1);
    } catch (const std::exception&) {
        caught = 1;
    }
    return caught + static_cast<int>(v.size() + m.size() + nodes.size()) == 316 ? 0 : 1;
}
