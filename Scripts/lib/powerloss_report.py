#!/usr/bin/env python3
"""Summarizes power-loss runs (the JSON lines of powerloss.py): seeds, power losses, and how many
acknowledged saves each loss took, per mode, as a distribution."""
import json
import sys


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    for mode in ("normal", "durable"):
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        per_loss = sorted(n for r in mine for n in (r.get("acknowledged_lost_per_range") or []))
        losses = sum(len(r["losses"]) for r in mine)
        # A loss that took nothing leaves no lost range: count it as zero.
        per_loss = [0] * max(0, losses - len(per_loss)) + per_loss
        failed = [r["seed"] for r in mine if not r["ok"]]
        acknowledged = sum(r.get("acknowledged") or 0 for r in mine)

        def pct(p):
            return per_loss[min(len(per_loss) - 1, int(p * len(per_loss)))] if per_loss else 0
        print(f"{mode}: {len(mine)} seeds ({mine[0]['seed']}…{mine[-1]['seed']}), {losses} power losses, "
              f"{acknowledged} acknowledged saves; lost per power loss: median {pct(0.5)}, p90 {pct(0.9)}, "
              f"max {per_loss[-1] if per_loss else 0}; failed seeds: {failed or 'none'}")
        for r in mine:
            if not r["ok"]:
                print(f"  seed {r['seed']}: {r.get('error')} (work: {r.get('work')})")


if __name__ == "__main__":
    main(sys.argv[1])
