/// @brief pretty_exception example: trace every exception to syslog (one line per exception) while still handling it.
//
// Run it, then look for the record: `journalctl -t pretty_exception_example_syslog_trace` or
// `grep pretty_exception_example /var/log/syslog`. Built with -DPRETTY_EXCEPTION_SYSLOG=1 the switch
// below is not needed: tracing then starts on.
#include "pretty_exception.h"

#include <iostream>
#include <syslog.h>

namespace billing {

[[gnu::noinline]] long charge(long cents) {
    if (cents < 0) THROW_LOGIC_ERROR("negative charge: ", cents, " cents");
    return cents;
}

[[gnu::noinline]] long checkout(long cents) {
    const long total = charge(cents);
    std::cout << "charged " << total << " cents\n";  // work after the call keeps this frame
    return total;
}

}  // namespace billing

int main() {
    // Facility and priority of the records; the record is sent when the exception is constructed.
    pretty_exception::set_syslog(true, LOG_LOCAL0, LOG_ERR);
    try {
        billing::checkout(-250);
    } catch (const std::exception& e) {
        std::cout << "handled: " << e.what() << "\nthe syslog record said:\n  " << pretty_exception::to_one_line(e)
                  << '\n';
    }
    return 0;
}
