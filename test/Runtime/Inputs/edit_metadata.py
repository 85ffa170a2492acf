"""Writes an edited copy of a kernel's metadata: edit_metadata.py IN OUT
EDIT..., where each EDIT is one of
  reverse-params          the params list in reverse order
  drop-param=ROLE         the param with ROLE removed (and has_lse or
                          has_kv_lens turned off when ROLE is lse/kv_lens)
  FIELD=JSON              a top-level field set to a JSON value
"""
import json
import sys


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(src) as f:
        md = json.load(f)
    for edit in edits:
        if edit == "reverse-params":
            md["params"].reverse()
        elif edit.startswith("drop-param="):
            role = edit.split("=", 1)[1]
            md["params"] = [p for p in md["params"] if p["role"] != role]
            flag = {"lse": "has_lse", "kv_lens": "has_kv_lens"}.get(role)
            if flag:
                md[flag] = False
        else:
            key, value = edit.split("=", 1)
            md[key] = json.loads(value)
    with open(dst, "w") as f:
        json.dump(md, f, indent=2)


if __name__ == "__main__":
    main()
