"""Runs the reference documentation's three Python examples (tests/conformance/reference/) against
`hookbox serve` and asserts on what the reference promises. Needs the real sandbox and hooks: with
the unisolated local backend no hook runs, so the gates cannot deny.

Promises checked (from shared/reference/000_4a40fa512f86aa3a.txt):
1. security gate: the `rm -rf` command is blocked and the answer carries the gate's reason;
2. privacy gate: the PII read is blocked with the policy's reason, and the continuation
   (previous_interaction_id, same environment) reads the approved public file;
3. audit telemetry: the file is written and read back ('event 1'). That the post hook's POST reached
   telemetry.example.com through the egress proxy needs a DNS override for that name; TODO(lead).
"""

import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
expectations = {
    "1_security_gate.py": ["Destructive command blocked by security gate."],
    "2_privacy_gate.py": ["blocked by PII compliance policy", "Engineering"],
    "3_audit_telemetry.py": ["event 1"],
}
failed = 0
for script, needles in expectations.items():
    out = subprocess.run([sys.executable, os.path.join(here, "reference", script)], capture_output=True, text=True, timeout=600)
    missing = [n for n in needles if n not in out.stdout]
    ok = out.returncode == 0 and not missing
    failed += not ok
    print(("ok   " if ok else "FAIL ") + script + ("" if ok else f": exit {out.returncode}, missing {missing}\n{out.stdout}{out.stderr}"))
sys.exit(1 if failed else 0)
