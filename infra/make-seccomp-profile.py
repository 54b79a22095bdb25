#!/usr/bin/env python3
"""Write infra/seccomp.json: the engine's default seccomp profile (containers-common's, which Podman
uses and which matches Docker's) with what a sandbox must never do removed from its allow-lists.

Denied with EPERM, whatever the capabilities: new namespaces (unshare, setns, clone with a CLONE_NEW*
flag; clone3 answers ENOSYS so libc falls back to clone), mounts of any kind, ptrace and the
cross-process memory calls. Run it again when the engine's default profile changes:
    infra/make-seccomp-profile.py [/usr/share/containers/seccomp.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DENIED = (
    "unshare setns ptrace process_vm_readv process_vm_writev kcmp mount umount umount2 pivot_root "
    "open_tree move_mount fsopen fsmount fsconfig fspick mount_setattr clone clone3"
).split()
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
EPERM, ENOSYS = 1, 38


def derive(default: dict) -> dict:
    rules = []
    for rule in default["syscalls"]:
        names = rule["names"]
        if rule["action"] == "SCMP_ACT_ALLOW":
            names = [n for n in names if n not in DENIED]
        elif any(n in DENIED for n in names):
            continue  # capability-conditional variants of a denied call: ours below replace them
        if names:
            rules.append({**rule, "names": names})
    rules.append(
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": CLONE_NEW_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
        }
    )
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS})
    rules.append(
        {
            "names": [n for n in DENIED if n not in ("clone", "clone3")],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": EPERM,
        }
    )
    return {**default, "syscalls": rules}


def main() -> None:
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/containers/seccomp.json")
    target = Path(__file__).resolve().parent / "seccomp.json"
    target.write_text(json.dumps(derive(json.loads(source.read_text())), indent=1) + "\n")
    print(f"make-seccomp-profile: wrote {target} from {source}")


if __name__ == "__main__":
    main()
