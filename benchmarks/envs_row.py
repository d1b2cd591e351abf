"""One row of `make envs-compare`'s table from a compare's comparison.json (standard library only):
graphs aligned, ops changed on the eager / compiled side, the first changed op, closer/farther from
fp64, and whether its compiled value now equals eager (toward/away)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def row(path: Path) -> str:
    if not path.is_file():
        return "-\t-\t-\t(no comparison.json: see the log)\t-\t-"
    data = json.loads(path.read_text())
    graphs = data["graphs"]
    aligned = ", ".join(f"{g['name']} {g['aligned']}/{g['recorded_nodes']}" for g in graphs) or "none"
    changes = [c for g in graphs for c in g["changes"]]
    sides = [sum(c["side"] == side for c in changes) for side in ("eager", "compiled")]
    structure = sum(len(g["structure"]) for g in graphs)
    if not changes:
        first, direction, versus = ("graph changed" if structure else "none"), "-", "-"
    else:
        change = changes[0]
        first, direction = f"{change['op']} ({change['side']}, {change['graph']})", change["direction"] or "changed"
        gap = change.get("eager_gap")
        versus = "-" if not gap else ("equals eager" if gap["matches_eager"] else "differs") + f", {gap['toward'] or 'same gap'}"
    return f"{aligned}\t{sides[0]}\t{sides[1]}\t{first}\t{direction}\t{versus}"


if __name__ == "__main__":
    print(row(Path(sys.argv[1])))
