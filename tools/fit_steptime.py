"""Command line of the steptime fit (calibration/fitting/steptime.py): write the shipped YAML or --check it.

    python tools/fit_steptime.py            # fit, print the report, write profiles/data/fitted/
    python tools/fit_steptime.py --check    # refit and compare with the shipped YAML (exit 1 on a mismatch)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from calibration.fitting.steptime import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
