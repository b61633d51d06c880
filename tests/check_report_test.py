#!/usr/bin/env python3
"""check_report_test.py <backplane> <schema> <workdir>: `backplane check
--report` writes a file the schema in the repo accepts, with values that
agree with the check's own output; `check --diff` finds no regression
between a report and itself and exactly the regressions planted in a
copy (a case now failing, an NMSE grown 100x, a case gone, an invariance
lost), and refuses a file that is not a report."""
import copy, json, os, re, subprocess, sys

import jsonschema

bp, schema_path, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
old = os.path.join(work, "old.json")
new = os.path.join(work, "new.json")


def run(*args):
    p = subprocess.run([bp, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


rc, out, err = run("check", "--device", "cpu", "--op", "MUL_MAT", "--op", "ADD", "--report", old)
if rc != 0:
    fail(f"check --report exited {rc}: {err}")
report = json.load(open(old))
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)

# The report says what the text output says.
dev = report["devices"][0]
m = re.search(r"cpu: (\d+) passed, (\d+) failed, (\d+) unsupported", out)
if not m or [int(x) for x in m.groups()] != [dev["totals"][k] for k in ("passed", "failed", "unsupported")]:
    fail(f"totals {dev['totals']} disagree with the summary line {m and m.group(0)}")
if len(dev["cases"]) != sum(dev["totals"].values()):
    fail("the cases do not add up to the totals")
cov = {c["op"]: c["passed"] for c in dev["coverage"]}
for op in ("MUL_MAT", "ADD"):
    n = sum(1 for c in dev["cases"] if c["op"] == op and c["result"] == "pass")
    if cov.get(op) != n or n == 0:
        fail(f"coverage of {op} is {cov.get(op)}, the cases say {n}")
    if not re.search(rf"PASS +cpu +{op} ", out):
        fail(f"no PASS line for {op} in the output")
checks = {(i["check"], i["type"]) for i in dev["invariance"]}
for t in ("f32", "f16", "q4_0", "q8_0", "q4_K", "q6_K"):
    if ("batch", t) not in checks or ("threads", t) not in checks:
        fail(f"invariance checks for {t} are missing: {sorted(checks)}")
if dev["plugin"]["family"] != "cpu" or not os.path.isabs(dev["plugin"]["file"]):
    fail(f"plugin record {dev['plugin']}")

# A report against itself: nothing to report.
rc, out, err = run("check", "--diff", old, old)
if rc != 0 or "no regressions" not in out:
    fail(f"diff of a report with itself exited {rc}: {out}{err}")

# Four planted regressions, and one change that is not one (an NMSE that
# grew but stays at rounding noise).
bad = copy.deepcopy(report)
cases = bad["devices"][0]["cases"]
passing = [c for c in cases if c["result"] == "pass"]
passing[0]["result"] = "fail"
passing[0]["message"] = "planted"
grow = passing[1]
grow["nmse"] = max(grow["nmse"], 1e-12) * 100
# Growth below the noise floor (1e-12) is not a regression.
passing[2]["nmse"] = 5e-12
gone = passing[-1]
cases.remove(gone)
bad["devices"][0]["invariance"][1]["result"] = "fail"
json.dump(bad, open(new, "w"))
rc, out, err = run("check", "--diff", old, new)
lines = [l for l in out.splitlines() if l.startswith("REGRESSION")]
want = ["passed, now fails (planted)", "NMSE grew", "coverage lost", "threads invariance"]
if rc != 1 or len(lines) != 4 or any(not any(w in l for l in lines) for w in want):
    fail(f"diff exited {rc} with {lines}; wanted one line each for {want}")
if "4 regressions" not in err:
    fail(f"no count sentence: {err}")
# The reverse direction: only the one that now passes is no regression; the
# case that came back and the fixed invariance are not regressions either.
rc, out, err = run("check", "--diff", new, old)
if rc != 0:
    fail(f"an improvement was called a regression: {out}")

# Not a report: one sentence, exit 1.
json.dump({"hello": 1}, open(new, "w"))
rc, out, err = run("check", "--diff", old, new)
if rc != 1 or "not a backplane-check-report/1 file" not in err:
    fail(f"a foreign file gave {rc}: {err}")
open(new, "w").write("{ truncated")
rc, out, err = run("check", "--diff", old, new)
if rc != 1 or "cannot read report" not in err:
    fail(f"a broken file gave {rc}: {err}")
print("check --report and --diff: ok")
