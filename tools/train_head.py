"""Train an EAGLE-3 head for the CPU target on its own outputs (docs/trained_heads.md).

    python tools/train_head.py --workload chat --samples 320 --epochs 3 --name smollm2-135m-eagle3-chat
    python tools/train_head.py --workload code --samples 320 --epochs 3 --name smollm2-135m-eagle3-chat-code \\
        --init-from smollm2-135m-eagle3-chat

Same as `python -m calibration train-head ...`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from calibration.__main__ import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["train-head", *sys.argv[1:]]))
