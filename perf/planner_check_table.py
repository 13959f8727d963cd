#!/usr/bin/env python3
"""The tables of perf/planner_check.sh, from the directory it wrote: one subdirectory per
candidate (none_ring, none_recursive_doubling, CODEC_ALGORITHM..., auto), each holding one
directory per run with emulated_cluster.sh's RATE_RTT_CODEC.json (all_reduce_perf -J) and rank
logs (TERSE_DEBUG=INFO).

Measured: the mean of the out-of-place and in-place time_us (each a mean over ranks).
Predicted: the JSON's predicted_us, the planner's prediction for the last timed call of what ran
(the forced algorithm; for an uncompressed candidate, run as auto:max_rel_err=0, the only
candidate that plan has), on the figures learned by then (planner.h, Learning); where a JSON has
none, for an uncompressed candidate, the prediction its run logged at its first call (rank 0's
"... (predicted: none dense_ring 3.55 ms, ...)", 3 significant digits).
auto: the candidate its plan chose (logged) and what ran (the JSON's codec and algorithm);
`best` is the fastest measured candidate among those auto weighed (its logged plan: candidates
whose error bound keeps max_rel_err). Goals: auto within 10% of the best; measured / predicted
within 1.5x in at least 90% of the cells.

    planner_check_table.py OUTDIR
"""
import json
import os
import re
import sys

PLAN = re.compile(r"\((\d+) x (float|half|bfloat16)\).*?"
                  r"(?:plan: |is predicted fastest, )(\S+) (\S+) (\S+) ms(?: \(predicted: (.*)\))?\s*$")
ELEMENT_BYTES = {"float": 4, "half": 2, "bfloat16": 2}


def size_text(size):
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size}"


def codec_name(spec):
    return spec.split(":")[0]


def plan_name(codec, algorithm):
    """A plan's (codec name, algorithm) as planner_check.sh names the candidate."""
    return f"{codec}_{algorithm.replace('dense_', '')}"


def logged_plans(log_path):
    """{size: (chosen candidate name, {candidate name: seconds})}: the first plan per size."""
    plans = {}
    if not os.path.exists(log_path):
        return plans
    with open(log_path, errors="replace") as handle:
        for line in handle:
            match = PLAN.search(line)
            if not match:
                continue
            size = int(match.group(1)) * ELEMENT_BYTES[match.group(2)]
            if size in plans:
                continue
            chosen = plan_name(codec_name(match.group(3)), match.group(4))
            # An uncompressed plan names only the dense algorithm the communicator runs, without
            # a list of the others.
            candidates = {chosen: float(match.group(5)) * 1e-3}
            for entry in (match.group(6) or "").split(", "):  # a spec's own commas have no space
                parts = entry.rsplit(" ", 3)  # codec, algorithm, value, "ms"
                if len(parts) == 4 and parts[3] == "ms":
                    candidates[plan_name(codec_name(parts[0]), parts[1])] = float(parts[2]) * 1e-3
            plans[size] = (chosen, candidates)
    return plans


def files_in(directory, link):
    """The JSON files under `directory`: link checks (link_*.json) or all_reduce_perf's."""
    for where, _, files in sorted(os.walk(directory)):
        for name in sorted(files):
            if name.endswith(".json") and name.startswith("link_") == link:
                yield os.path.join(where, name)


def runs_of(directory):
    """{(rate, rtt): {size: row}} of one candidate's directory."""
    runs = {}
    for path in files_in(directory, link=False):
        rate, rtt = os.path.basename(path).split("_")[:2]
        with open(path) as handle:
            document = json.load(handle)
        plans = logged_plans(path[: -len(".json")] + ".rank0.log")
        rows = runs.setdefault((rate, rtt), {})
        for result in document["results"]:
            out, inp = result["out_of_place"], result["in_place"]
            chosen, plan = plans.get(result["size"], (None, {}))
            rows[result["size"]] = {
                "time_s": (out["time_us"] + inp["time_us"]) / 2 * 1e-6,
                "times_s": (out["time_us"] * 1e-6, inp["time_us"] * 1e-6),
                "ran": plan_name(out.get("codec", "none"), out.get("algorithm", "?")),
                "predicted_s": out["predicted_us"] * 1e-6 if "predicted_us" in out else None,
                "wrong": (out.get("wrong"), inp.get("wrong")),
                "chosen": chosen,
                "plan": plan,
            }
    return runs


def links_of(directories):
    """{(rate, rtt): [(ping avg ms, tcp Mbit/s, mean Mbit/s of every node to the next at once
    or None)]} over every run's link check."""
    links = {}
    for directory in directories:
        for path in files_in(directory, link=True):
            with open(path) as handle:
                link = json.load(handle)
            ring = link.get("tcp_ring")  # absent from files written before it was measured
            links.setdefault((link["rate"], link["rtt"]), []).append(
                (link["ping_ms"]["avg"], link["tcp"]["mbit"], ring["mean_mbit"] if ring else None))
    return links


def bps(rate):
    """tc's rate (1gbit) in bit/s, for sorting."""
    match = re.match(r"([0-9.]+)([kmgt]?)bit$", rate)
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
    return float(match.group(1)) * scale[match.group(2)] if match else 0


def rtt_us(rtt):
    match = re.match(r"([0-9.]+)(us|ms|s)$", rtt)
    return float(match.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[match.group(2)] if match else 0


def link_order(key):
    return (bps(key[0]), rtt_us(key[1]))


def candidate_order(name):
    """none first, then each codec's algorithms in the order planner_check.sh runs them."""
    if name.startswith("none_"):
        return (0, "", name != "none_ring")
    codec, _, algorithm = name.partition("_")
    return (1, codec, {"tree": 0, "recursive_doubling": 1, "sra": 2}.get(algorithm, 3))


def ms(seconds):
    if seconds is None:
        return "-"
    value = seconds * 1e3
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def label(name):
    return name.replace("_recursive_doubling", " rd").replace("_", " ")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    names = [n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n))]
    if "auto" not in names:
        sys.exit(f"planner_check_table.py: no auto/ in {root}")
    candidates = sorted((n for n in names if n != "auto"), key=candidate_order)
    runs = {n: runs_of(os.path.join(root, n)) for n in names}

    links = links_of([os.path.join(root, n) for n in names])
    print("| link | RTT asked | ping RTT avg (ms), over the runs | TCP node 0 -> 1 alone (Mbit/s), "
          "over the runs | TCP every node to the next at once, mean per flow (Mbit/s), over the "
          "runs |")
    print("| --- | --- | --- | --- | --- |")
    for (rate, rtt), checks in sorted(links.items(), key=lambda item: link_order(item[0])):
        pings, tcps = [c[0] for c in checks], [c[1] for c in checks]
        rings = [c[2] for c in checks if c[2] is not None]
        ring_text = f"{min(rings):.0f} - {max(rings):.0f}" if rings else "-"
        print(f"| {rate} | {rtt} | {min(pings):.3f} - {max(pings):.3f} | "
              f"{min(tcps):.0f} - {max(tcps):.0f} | {ring_text} |")
    print()

    head = ["link", "RTT", "size"] + [label(n) for n in candidates]
    head += ["auto's plan", "auto ran", "auto: measured (predicted)", "best auto may choose",
             "auto / best", "auto's pick, forced run / best", "all within 1.5x"]
    print("Each candidate: measured / predicted ms (ratio); `*` off by more than 1.5x; `n/w`: not "
          "weighed by auto (its error bound exceeds max_rel_err). auto / best: **bold** past 10%.")
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    details = []
    off, total, unknown = [], 0, 0
    judged, misses, pick_judged, pick_misses = 0, 0, 0, 0
    keys = sorted(runs["auto"], key=link_order)
    for key in keys:
        rate, rtt = key
        for size in sorted(runs["auto"][key]):
            auto = runs["auto"][key][size]
            weighed = auto["plan"]
            cells = [rate, rtt, size_text(size)]
            all_within = True
            best = None
            measured = {}
            for name in candidates:
                row = runs[name].get(key, {}).get(size)
                if row is None:
                    cells.append("-")
                    continue
                measured[name] = row["time_s"]
                predicted = row["predicted_s"]
                if predicted is None and name.startswith("none_"):
                    predicted = row["plan"].get(name)
                ratio = row["time_s"] / predicted if predicted else None
                if ratio is None:
                    unknown += 1
                    all_within = None if all_within else all_within
                    cell = f"{ms(row['time_s'])} / ?"
                else:
                    total += 1
                    cell = f"{ms(row['time_s'])} / {ms(predicted)} ({ratio:.2f})"
                    if not 1 / 1.5 <= ratio <= 1.5:
                        all_within = False
                        off.append(name)
                        cell += " *"
                if weighed and name not in weighed:
                    cell += " n/w"
                elif name in weighed and (best is None or row["time_s"] < best[1]):
                    best = (name, row["time_s"])
                if row["ran"] != name:
                    cell += f" (ran {label(row['ran'])})"
                cells.append(cell)
                details.append([rate, rtt, size_text(size), name, label(row["ran"]),
                                ms(row["times_s"][0]), ms(row["times_s"][1]), ms(predicted),
                                ms(row["predicted_s"]), f"{ratio:.2f}" if ratio else "-",
                                "/".join(str(w) for w in row["wrong"])])
            chosen = auto["chosen"] or "?"
            cells += [label(chosen), label(auto["ran"]) + (" (not the plan's)" if auto["ran"] != chosen else ""),
                      f"{ms(auto['time_s'])} ({ms(auto['predicted_s'])})"]
            if best is not None:
                share = auto["time_s"] / best[1]
                judged += 1
                misses += share > 1.10
                cells += [f"{label(best[0])} {ms(best[1])}",
                          f"{share:.2f}" if share <= 1.10 else f"**{share:.2f}**"]
                if chosen in measured:
                    pick = measured[chosen] / best[1]
                    pick_judged += 1
                    pick_misses += pick > 1.10
                    cells.append(f"{pick:.2f}" if pick <= 1.10 else f"**{pick:.2f}**")
                else:
                    cells.append("not measured")
            else:
                cells += ["-", "-", "-"]
            cells.append({True: "yes", False: "**no**", None: "?"}[all_within])
            print("| " + " | ".join(cells) + " |")
            details.append([rate, rtt, size_text(size), "auto", label(auto["ran"]),
                            ms(auto["times_s"][0]), ms(auto["times_s"][1]), ms(auto["predicted_s"]),
                            ms(auto["predicted_s"]),
                            f"{auto['time_s'] / auto['predicted_s']:.2f}" if auto["predicted_s"] else "-",
                            "/".join(str(w) for w in auto["wrong"])])
    print()
    print(f"Predictions within 1.5x: {total - len(off)} of {total}"
          f"{f' ({unknown} without a prediction)' if unknown else ''}. "
          f"auto's run within 10% of the best candidate it may choose: {judged - misses} of {judged}; "
          f"its pick's forced run within 10%: {pick_judged - pick_misses} of {pick_judged}.")
    print()
    print("Every run: what ran, out-of-place and in-place ms, the prediction used, the JSON's "
          "predicted_us, measured / predicted, #wrong (out/in).")
    print()
    print("| link | RTT | size | candidate | ran | out (ms) | in (ms) | predicted (ms) | "
          "JSON predicted_us (ms) | measured / predicted | #wrong |")
    print("|" + " --- |" * 11)
    for row in details:
        print("| " + " | ".join(row) + " |")
    print()
    print("auto's plans (rank 0's INFO line, ms; the chosen one first):")
    print()
    for key in keys:
        for size in sorted(runs["auto"][key]):
            auto = runs["auto"][key][size]
            text = ", ".join(f"{label(n)} {ms(s)}" for n, s in auto["plan"].items())
            print(f"- {key[0]} {key[1]} {size_text(size)}: **{label(auto['chosen'] or '?')}**; {text}")


if __name__ == "__main__":
    main()
