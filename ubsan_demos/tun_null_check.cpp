// @brief The Linux tun driver bug (CVE-2009-1897): a dereference before the null check deletes the check.
//
// `struct sock *sk = tun->sk;` comes before `if (!tun) return POLLERR;`. Since dereferencing null is
// undefined, GCC concludes tun is not null and removes the check at -O2
// (-fdelete-null-pointer-checks); the kernel then used a mapped page 0. -fsanitize=null reports the
// load.
#include <cstdio>

struct tun_struct {
    int sk;
};

constexpr int POLLERR = -8;

__attribute__((noinline)) int tun_chr_poll(tun_struct *tun) {
    int sk = tun->sk;  // UB: tun-deref
    if (!tun) {  // NULLCHECK: tun
        return POLLERR;
    }
    return sk;
}

int main() {
    tun_struct *volatile tun = nullptr;
    std::printf("poll %d\n", tun_chr_poll(tun));
    return 0;
}
