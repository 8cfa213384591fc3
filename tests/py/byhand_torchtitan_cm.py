"""By hand (not in ctest): feed `pptune export --format torchtitan PROFILE` overrides to the real
torchtitan ConfigManager().parse_args. Usage:
  PY=$(tests/py/venv.sh interop)
  $PY -m pip install --target SITE --no-deps torchtitan==0.3.0 tyro==1.0.17 docstring-parser typeguard
  PYTHONPATH=SITE $PY tests/py/byhand_torchtitan_cm.py build/tuner/pptune PROFILE...
It puts `--module llama3 --config llama3_debugmodel` before our overrides (torchtitan 0.3.0
requires both and our export writes neither) and prints OK, REFUSED with torchtitan's message, or
EXPORT FAILED per profile; exit 1 when any is not OK. Run on 2026-12-02 on two fixture profiles
(llama3-70b x 16, gpt-13b x 32): without the two flags both were refused for the missing
--module; with them, the llama3 config registry did not import (packages this install leaves out)."""
import subprocess, sys, traceback
pptune, profiles = sys.argv[1], sys.argv[2:]
try:
    from torchtitan.config.manager import ConfigManager
except Exception:
    traceback.print_exc(limit=3); sys.exit(1)
bad = 0
for p in profiles:
    out = subprocess.run([pptune, "export", "--format", "torchtitan", p], capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        bad += 1
        print(f"EXPORT FAILED {p}: exit {out.returncode}: {out.stderr.strip()[:300]}")
        continue
    words = ["--module", "llama3", "--config", "llama3_debugmodel"] + out.stdout.splitlines()[-1].split()
    try:
        cfg = ConfigManager().parse_args(words)
        print(f"OK {p}: pp={cfg.parallelism.pipeline_parallel_degree} sched={cfg.parallelism.pipeline_parallel_schedule}")
    except BaseException as e:
        bad += 1
        print(f"REFUSED {p}: {type(e).__name__}: {str(e)[:300]}")
sys.exit(1 if bad else 0)
