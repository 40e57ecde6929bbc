/*
 * Short function names (PPROF_SYMBOLS=short): what pprof shows for the
 * names it demangles, from the names libiberty's demangler gives.
 */
#include "agent/symbols/symbols.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *shorten(const char *full)
{
    static char buf[512];
    symbols_short_name(full, buf, sizeof buf);
    return buf;
}

TEST(short_names)
{
    /* C names, and names with nothing to drop, are unchanged. */
    expect_str_eq(shorten("main"), "main");
    expect_str_eq(shorten("ns::Class::method"), "ns::Class::method");
    /* Parameters, template arguments, return types. */
    expect_str_eq(shorten("flame_cpu_outer(long)"), "flame_cpu_outer");
    expect_str_eq(shorten("int flame_cpu_leaf<int>(long)"), "flame_cpu_leaf");
    expect_str_eq(shorten("std::vector<std::pair<int, long>, "
                          "std::allocator<std::pair<int, long> > >::"
                          "push_back(std::pair<int, long> const&)"),
                  "std::vector::push_back");
    expect_str_eq(shorten("std::map<int, std::function<void (int)>, "
                          "std::less<int> >::find(int const&) const"),
                  "std::map::find");
    expect_str_eq(shorten("unsigned long hash<char const*>(char const*, "
                          "unsigned long)"),
                  "hash");
    /* Clones and qualifiers after the parameters. */
    expect_str_eq(shorten("foo(int) [clone .cold]"), "foo");
    expect_str_eq(shorten("Obj::get() const &&"), "Obj::get");
    /* Operators keep their symbols. */
    expect_str_eq(shorten("std::ostream& std::operator<< <std::char_traits"
                          "<char> >(std::ostream&, char const*)"),
                  "std::operator<<");
    expect_str_eq(shorten("Cmp::operator()(int, int) const"),
                  "Cmp::operator()");
    expect_str_eq(shorten("operator new(unsigned long)"), "operator new");
    expect_str_eq(shorten("operator delete[](void*)"), "operator delete[]");
    expect_str_eq(shorten("Ptr<int>::operator->() const"), "Ptr::operator->");
    expect_str_eq(shorten("bool operator<(A const&, A const&)"), "operator<");
    expect_str_eq(shorten("Num::operator unsigned long() const"),
                  "Num::operator unsigned long");
    /* Anonymous namespaces and lambdas stay whole; an enclosing
     * function's parameters go. */
    expect_str_eq(shorten("(anonymous namespace)::worker(void*)"),
                  "(anonymous namespace)::worker");
    expect_str_eq(shorten("run(int)::{lambda(int)#1}::operator()(int) const"),
                  "run::{lambda(int)#1}::operator()");
    /* Rust generics and closures. */
    expect_str_eq(shorten("core::ptr::drop_in_place<alloc::vec::Vec<u8>>"),
                  "core::ptr::drop_in_place");
    expect_str_eq(shorten("std::rt::lang_start::{{closure}}"),
                  "std::rt::lang_start::{{closure}}");
}

TEST(short_names_bounded)
{
    /* A name longer than the buffer is cut, always terminated. */
    char small[8];
    expect_int_eq(symbols_short_name("abcdefghijkl(int)", small, sizeof small),
                  7);
    expect_str_eq(small, "abcdefg");
    /* Unbalanced input does not read past its end. */
    expect_str_eq(shorten("broken<int(long"), "broken");
    expect_str_eq(shorten("f(((("), "f");
    expect_str_eq(shorten(""), "");
}

int main(void)
{
    return run_tests(short_names, short_names_bounded, NULL);
}
