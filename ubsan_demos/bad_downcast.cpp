// @brief Calling a derived-class method through a pointer that really points to a base object.
//
// The seed's MSVC-versus-GCC example: static_cast<Derived *> of a Base that is not a Derived is
// undefined. It "works" while the method touches only base members and crashes on another compiler
// (or layout) once it does not. -fsanitize=vptr (C++, needs RTTI) reports the cast and the call.
#include <cstdio>

struct Base {
    virtual ~Base() = default;
    int id = 7;
};

struct Derived : Base {
    int extra = 42;
    __attribute__((noinline)) int id_plus_one() const { return id + 1; }
};

__attribute__((noinline)) int use_as_derived(Base *base) {
    Derived *d = static_cast<Derived *>(base);  // UB: downcast
    return d->id_plus_one();  // UB: member-call
}

int main() {
    Base *base = new Base;
    std::printf("id+1 %d\n", use_as_derived(base));
    delete base;
    return 0;
}
