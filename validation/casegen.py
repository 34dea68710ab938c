"""What the batches' make-cases.py scripts share: reading a folder's commented CSV tables and
writing flat case files into validation/cases/ (python3 standard library only)."""
import csv
import os

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")
# the cluster presets, as a case file in validation/cases/ names them
H100 = "../../configs/clusters/dgx-h100.yaml"
A100 = "../../configs/clusters/dgx-a100.yaml"


def rows(folder, name):
    """The rows of a CSV table whose leading '#' lines say where it comes from."""
    with open(os.path.join(folder, name)) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def write_case(name, fields):
    with open(os.path.join(CASES, name + ".yaml"), "w") as f:
        for key, value in fields:
            f.write(f"{key}: {value}\n")


def node_sets(gpus):
    """A job of fewer GPUs than a DGX node runs on one node of that many."""
    return [f"node.count={gpus // 8}"] if gpus >= 8 else ["node.count=1", f"node.gpus_per_node={gpus}"]


def quoted(text):
    """A case file's string value: double-quoted, its own double quotes made single."""
    return '"' + text.replace('"', "'") + '"'


def listed(items):
    """A case file's list value: `[a, b, ...]`."""
    return "[" + ", ".join(items) + "]"


def write_check(name, source, notes, prediction):
    """A check case (nothing fitted on it): its name, role, source and notes, then `prediction`,
    the (key, value) pairs of what dlsim runs and what was measured."""
    write_case(name, [("name", name), ("role", "check"), ("source", quoted(source)),
                      ("notes", quoted(notes))] + prediction)
