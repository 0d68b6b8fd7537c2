"""Command line of the borrowed step-time fit (calibration/fitting/borrowed.py): GPUs without kernel data.

    python tools/fit_borrowed_steptime.py            # fit, print the report, write the shipped YAML
    python tools/fit_borrowed_steptime.py --check    # refit and compare with the shipped YAML (exit 1 on a mismatch)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from calibration.fitting.borrowed import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
