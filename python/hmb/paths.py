"""Where the repository hmb runs from is: its sources, build/ and .venv/. A leaf: every layer may
import it, it imports nothing of hmb."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
