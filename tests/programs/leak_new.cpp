/* @brief new and new[] leaks: the site is the user's line, not operator new. */
#include <cstdio>

struct Widget {
    char data[48];
};

static Widget *make_widget() {
    return new Widget();  // LEAK: new
}

static int *make_array() {
    return new int[25];  // LEAK: new-array
}

int main() {
    Widget *w = make_widget();
    int *a = make_array();
    return w == nullptr || a == nullptr;
}
