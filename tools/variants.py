#!/usr/bin/env python3
"""variants.py SEED OUTDIR - write one candidate file per combination of the seed's params
(each `// kevo param NAME V...` line rewritten with the combination's value first), for an
exhaustive sweep to compare kevo run against (bench/README.md). Prints the file names."""
import itertools
import os
import re
import sys

PARAM = re.compile(r"^(\s*//\s+kevo\s+param\s+)(\w+)\s+(.*)$")


def main():
    seed, out = sys.argv[1], sys.argv[2]
    lines = open(seed).read().split("\n")
    params = []
    for i, ln in enumerate(lines):
        m = PARAM.match(ln)
        if m:
            params.append((i, m.group(1), m.group(2), [int(v) for v in m.group(3).split()]))
    os.makedirs(out, exist_ok=True)
    stem, ext = os.path.splitext(os.path.basename(seed))
    for combo in itertools.product(*[p[3] for p in params]):
        new = list(lines)
        tag = []
        for (i, pre, name, vals), v in zip(params, combo):
            rest = sorted(x for x in vals if x != v)
            new[i] = pre + name + " " + " ".join(str(x) for x in [v] + rest)
            tag.append("%s%d" % (name, v))
        path = os.path.join(out, "%s_%s%s" % (stem, "_".join(tag), ext))
        open(path, "w").write("\n".join(new))
        print(path)


if __name__ == "__main__":
    main()
