"""PASS/FAIL steps for the conformance scripts: one line per step, the first failure ends the run,
and a closing "<name>: N passed, N failed" line that CI logs show."""
import sys


class Steps:
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failures = 0

    def summary(self):
        print(f"{self.name}: {self.passed} passed, {self.failures} failed", flush=True)

    def step(self, what, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'}  {what}" + (f"  ({detail})" if detail else ""), flush=True)
        if not ok:
            self.failures += 1
            self.summary()
            raise SystemExit(1)
        self.passed += 1

    def unexpected(self, error):
        """An exception from the client under test counts as a failed step."""
        print(f"FAIL  unexpected {type(error).__name__}: {error}", flush=True)
        self.failures += 1
        self.summary()
        sys.exit(1)
