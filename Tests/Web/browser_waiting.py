"""What both browser drivers (cdp_browser, marionette_browser) share: waiting for a page condition."""

import time


class Waiting:
    """A mixin for a driver with evaluate(expression): wait_for polls it until it is truthy."""

    def wait_for(self, expression, timeout=30, interval=0.25):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.evaluate(expression)
            except RuntimeError as error:
                last = error
            if last and not isinstance(last, Exception):
                return last
            time.sleep(interval)
        raise TimeoutError(f"{expression} not true in {timeout} s (last: {last!r})")
