"""Command line of the speculation fit (calibration/fitting/speculation.py): write the shipped YAML or --check it.

    python tools/fit_speculation.py            # fit, print the report, write profiles/data/fitted/
    python tools/fit_speculation.py --check    # refit and compare with the shipped YAML (exit 1 on a mismatch)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from calibration.fitting.speculation_run import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
