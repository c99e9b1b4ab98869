"""tap.py - TAP output for the Python tests (what tests/test-lib.sh is for
the shell ones): ok, eq, raises, skip, done.  Run under automake's TAP
driver by tests/t188x-python-*.sh; an uncaught exception fails the test."""
import sys

_n = 0
_failed = 0


def ok(cond, desc, diag=None):
    global _n, _failed
    _n += 1
    if cond:
        print("ok %d - %s" % (_n, desc))
    else:
        _failed += 1
        print("not ok %d - %s" % (_n, desc))
        if diag is not None:
            for line in str(diag).splitlines()[:20]:
                print("# " + line)
    sys.stdout.flush()
    return bool(cond)


def eq(got, want, desc):
    return ok(got == want, desc, "got:  %r\nwant: %r" % (got, want))


def raises(exc, fn, desc, match=None):
    """fn() must raise exc (and its message contain match)."""
    try:
        fn()
    except exc as e:
        return ok(match is None or match in str(e), desc, "message: %s" % e)
    except BaseException as e:  # noqa: B902 - any other exception is the failure
        return ok(False, desc, "raised %s: %s" % (type(e).__name__, e))
    return ok(False, desc, "no exception")


def skip(count, why):
    global _n
    for _ in range(count):
        _n += 1
        print("ok %d # SKIP %s" % (_n, why))


def skip_all(why):
    print("1..0 # SKIP %s" % why)
    sys.exit(77)


def done():
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)
