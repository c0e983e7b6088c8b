#!/usr/bin/env python3
"""Checks one guest's results for tests/qemu-system.sh.

Usage: compare.py CONFIG OUT

OUT holds one directory per reading the guest took (`boot`, and `smt-off` after the sibling
threads went offline), each with powerdiag's live `collect.json`, `doctor.json` and
`doctor.txt` (and their `.rc`/`.err`), record.sh's `tree/` of the kernel's files read right
after, and `replay.json`: that tree collected by the native build on the host.

Every check is an equality between two readings of the same machine:
  1. live facts == the kernel's files in the tree (parsed here, independently of powerdiag);
  2. live facts == the native replay of the tree, for every fact a tree holds unchanged
     (counters, free memory and the process's resident size move between two reads);
  3. live verdicts of the host rules == the native doctor's on the tree (doctor.replay.json);
  4. across the readings: the SMT verdict (PD405) follows the threads per core.
Prints what it compared; exits 1 listing every mismatch.
"""

import json
import os
import re
import sys

CONFIG, OUT = sys.argv[1], sys.argv[2]
FAILS = []
CHECKED = []

# The CPU each configuration asks QEMU to emulate (tests/qemu-system.sh's -cpu): the only
# fact that comes from the command line rather than a kernel file, because on arm64 the
# name is powerdiag's own reading of the MIDR the kernel prints.
CPU_NAME = {"ppc64le": "POWER9", "arm64": "Cortex-A72"}


def expect(what, live, want):
    CHECKED.append(what)
    if live != want:
        FAILS.append(f"{what}: powerdiag says {live!r}, the kernel's files say {want!r}")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def cpu_list(text):
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def kv(path, key):
    """The number after `KEY:` in a meminfo-style file (node meminfo has a "Node N " prefix)."""
    for line in read(path).splitlines():
        m = re.match(r"^(?:Node \d+ )?" + re.escape(key) + r":\s+(\d+)", line)
        if m:
            return int(m.group(1))
    return None


def bracketed(path):
    m = re.search(r"\[([^\]]+)\]", read(path))
    return m.group(1) if m else None


def available(section, name):
    if not isinstance(section, dict) or "available" not in section:
        FAILS.append(f"{name}: unavailable: {section}")
        return {}
    return section["available"]


def kernel_facts(tree):
    """What the kernel's own files of this boot say, parsed without powerdiag."""
    sysc = f"{tree}/sys/devices/system/cpu"
    online = cpu_list(read(f"{sysc}/online"))
    siblings = {}
    for c in sorted(online):
        siblings[c] = frozenset(cpu_list(read(f"{sysc}/cpu{c}/topology/thread_siblings_list")))
    caches = set()
    for c in sorted(online):
        d = f"{sysc}/cpu{c}/cache"
        if not os.path.isdir(d):
            continue
        for idx in sorted(os.listdir(d)):
            p = f"{d}/{idx}"
            size = read(f"{p}/size").strip() if os.path.exists(f"{p}/size") else None
            if size is not None:
                m = re.fullmatch(r"(\d+)([KMG]?)", size)
                size = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
            caches.add((int(read(f"{p}/level")), read(f"{p}/type").strip(), size,
                        read(f"{p}/shared_cpu_list").strip()))
    nodes = []
    nd = f"{tree}/sys/devices/system/node"
    for n in sorted(cpu_list(read(f"{nd}/online"))):
        nodes.append({"id": n, "cpu_list": read(f"{nd}/node{n}/cpulist").strip(),
                      "memory_total_bytes": kv(f"{nd}/node{n}/meminfo", "MemTotal") * 1024})
    hp = f"{tree}/sys/kernel/mm/hugepages"
    huge = sorted(int(re.fullmatch(r"hugepages-(\d+)kB", e).group(1)) * 1024 for e in os.listdir(hp))
    page = int(read(f"{tree}/recorded/page-size"))
    pid = int(read(f"{tree}/root/run/mysqld/mysqld.pid"))
    status = read(f"{tree}/proc/{pid}/status")
    cpuinfo = read(f"{tree}/proc/cpuinfo")
    model = re.search(r"^cpu\s*:\s*(.+)$", cpuinfo, re.M)
    smt = f"{sysc}/smt"
    return {
        "arch": read(f"{tree}/recorded/uname-m").strip(),
        "threads": len(online),
        "cores": len(set(siblings.values())),
        "threads_per_core": max(len(s) for s in siblings.values()),
        "smt_control": read(f"{smt}/control").strip() if os.path.exists(f"{smt}/control") else None,
        "smt_active": read(f"{smt}/active").strip() == "1" if os.path.exists(f"{smt}/active") else None,
        "ppc_model": model.group(1).strip() if model else None,
        "caches": caches,
        "nodes": nodes,
        "memory_total_bytes": kv(f"{tree}/proc/meminfo", "MemTotal") * 1024,
        "hugepage_bytes": kv(f"{tree}/proc/meminfo", "Hugepagesize") * 1024,
        "page": page,
        "page_sizes": sorted({page, *huge}),
        "thp_enabled": bracketed(f"{tree}/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": bracketed(f"{tree}/sys/kernel/mm/transparent_hugepage/defrag"),
        "pid": pid,
        "comm": read(f"{tree}/proc/{pid}/comm").strip(),
        "process_threads": int(re.search(r"^Threads:\s*(\d+)", status, re.M).group(1)),
        "affinity": re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1),
    }


def check_kernel(name, snap, k):
    host = available(snap["host"], f"{name} host")
    os_ = available(snap["os"], f"{name} os")
    cpu = available(os_.get("cpu"), f"{name} cpu")
    topo = available(os_.get("topology"), f"{name} topology")
    mem = available(os_.get("memory"), f"{name} memory")
    proc = available(os_.get("process"), f"{name} process")
    p = f"{name}: "
    expect(p + "host arch (uname -m)", host.get("arch"), k["arch"])
    expect(p + "cpu architecture (uname -m)", cpu.get("architecture"), k["arch"])
    expect(p + "hardware threads (cpu/online)", host.get("hardware_threads"), k["threads"])
    expect(p + "cpu threads (cpu/online)", cpu.get("threads"), k["threads"])
    expect(p + "cores (distinct thread_siblings_list)", cpu.get("cores"), k["cores"])
    expect(p + "threads per core (thread_siblings_list)", cpu.get("threads_per_core"), k["threads_per_core"])
    expect(p + "SMT control (smt/control)", cpu.get("smt_control"), k["smt_control"])
    expect(p + "SMT active (smt/active)", cpu.get("smt_active"), k["smt_active"])
    if k["ppc_model"] is not None:
        expect(p + "cpu model (cpuinfo's cpu line)", cpu.get("model"), k["ppc_model"])
    want = CPU_NAME[CONFIG]
    CHECKED.append(p + f"cpu model names {want} (QEMU's -cpu)")
    if want not in (cpu.get("model") or ""):
        FAILS.append(f"{p}cpu model {cpu.get('model')!r} does not name {want}, the CPU QEMU emulates")
    caches = {(c["level"], c["kind"], c["size_bytes"], c["shared_cpu_list"]) for c in topo.get("caches", [])}
    expect(p + "caches (cpuN/cache/indexK)", sorted(caches, key=str), sorted(k["caches"], key=str))
    nodes = [{x: n[x] for x in ("id", "cpu_list", "memory_total_bytes")} for n in topo.get("numa_nodes", [])]
    expect(p + "NUMA nodes, their CPUs and memory (node/nodeN)", nodes, k["nodes"])
    expect(p + "memory total (meminfo)", host.get("memory_total_bytes"), k["memory_total_bytes"])
    expect(p + "base page size (getconf PAGESIZE / AT_PAGESZ)", host.get("page_size_bytes"), k["page"])
    expect(p + "memory base page", mem.get("base_page_bytes"), k["page"])
    expect(p + "page sizes (base + kernel/mm/hugepages)", mem.get("page_sizes"), k["page_sizes"])
    expect(p + "huge page size (meminfo Hugepagesize)", mem.get("hugepage_bytes"), k["hugepage_bytes"])
    expect(p + "THP enabled", mem.get("thp_enabled"), k["thp_enabled"])
    expect(p + "THP defrag", mem.get("thp_defrag"), k["thp_defrag"])
    expect(p + "mariadbd pid (mysqld.pid)", proc.get("pid"), k["pid"])
    expect(p + "mariadbd name (comm)", proc.get("name"), k["comm"])
    expect(p + "mariadbd threads (status Threads)", proc.get("threads"), k["process_threads"])
    expect(p + "mariadbd affinity (status Cpus_allowed_list)", proc.get("affinity"), k["affinity"])


# Facts a recorded tree holds unchanged, by section; the rest moves between two reads.
STABLE = {
    "cpu": ["model", "architecture", "power", "sockets", "cores", "threads", "threads_per_core",
            "smt_control", "smt_active", "nominal_mhz", "nominal_source", "governor", "dscr_default"],
    "topology": ["caches", "l3_total_bytes", "l3_cpus"],
    "memory": ["swap_total_bytes", "base_page_bytes", "thp_enabled", "thp_defrag",
               "hugepages_total", "hugepage_bytes", "page_sizes"],
    "process": ["pid", "name", "found_by", "kernel_page_sizes", "mmu_page_sizes", "thp_disabled",
                "allocator", "allocator_evidence", "affinity", "affinity_cpus", "threads"],
}


def check_replay(name, live, replay):
    p = f"{name}: replay of the tree: "
    for f in ("hostname", "os", "os_release", "arch", "hardware_threads", "memory_total_bytes", "page_size_bytes"):
        CHECKED.append(p + "host " + f)
        a, b = live["host"].get("available", {}).get(f), replay["host"].get("available", {}).get(f)
        if a != b:
            FAILS.append(f"{p}host.{f} is {b!r}, live {a!r}")
    for sec, fields in STABLE.items():
        a = live["os"]["available"].get(sec, {}).get("available")
        b = replay["os"]["available"].get(sec, {}).get("available")
        if a is None or b is None:
            FAILS.append(f"{p}{sec} unavailable (live {live['os']['available'].get(sec)}, replay {replay['os']['available'].get(sec)})")
            continue
        for f in fields:
            CHECKED.append(p + f"{sec}.{f}")
            if a.get(f) != b.get(f):
                FAILS.append(f"{p}{sec}.{f} is {b.get(f)!r}, live {a.get(f)!r}")
    a = [{x: n[x] for x in ("id", "cpu_list", "cpus", "memory_total_bytes")} for n in live["os"]["available"]["topology"]["available"]["numa_nodes"]]
    b = [{x: n[x] for x in ("id", "cpu_list", "cpus", "memory_total_bytes")} for n in replay["os"]["available"]["topology"]["available"]["numa_nodes"]]
    CHECKED.append(p + "NUMA nodes")
    if a != b:
        FAILS.append(f"{p}NUMA nodes {b}, live {a}")


# The kernel's line when it registered a hardware PMU (arm64's perf driver, POWER's).
PMU_REGISTERED = re.compile(r"hw perfevents: enabled with (\S+)|(\S+) performance monitor hardware support registered")
HARDWARE_EVENTS = {"instructions", "cycles", "dTLB-load-misses", "iTLB-load-misses", "stalled-cycles-backend"}


def check_counters(d):
    """The 2 s window's counters against the kernel's word on its PMU (dmesg)."""
    rc = read(f"{d}/doctor-window.rc").strip() if os.path.exists(f"{d}/doctor-window.rc") else "missing"
    CHECKED.append("boot: doctor --sample-window 2s exit code")
    if rc not in {"0", "1", "2"}:
        FAILS.append(f"boot: doctor --sample-window 2s exited {rc}: {read(f'{d}/doctor-window.err')[-1500:]}")
        return
    counters = available(json.loads(read(f"{d}/doctor-window.json"))["snapshot"]["os"]["available"].get("counters"),
                         "boot: counters over the window")
    pmu = PMU_REGISTERED.search(read(f"{OUT}/dmesg"))
    events = {e["name"]: e for e in counters.get("events", [])}
    CHECKED.append("boot: the window's counters against dmesg's PMU")
    if pmu is None:
        FAILS.append("boot: the guest kernel registered no PMU (dmesg), which QEMU emulates on both machines")
        return
    opened = sorted(n for n, e in events.items() if n in HARDWARE_EVENTS and e["unavailable"] is None)
    if not opened:
        FAILS.append(f"boot: the kernel registered {pmu.group(0)!r} but no hardware event opened: {events}")
    for n, e in events.items():
        why = e["unavailable"] or ""
        if n in HARDWARE_EVENTS and why and ("no hardware PMU" in why or n not in why):
            FAILS.append(f"boot: {n}: {why!r} beside the kernel's {pmu.group(0)!r} (and {opened} counted)")
    print(f"  boot: PMU {pmu.group(0)!r}: hardware events opened {opened}; "
          + "; ".join(f"{n}: {e['unavailable']}" for n, e in events.items() if e["unavailable"]))


def host_verdicts(report):
    """Status of every rule that judges the host (not the database, which is unreachable)."""
    return {c["code"]: c["status"] for c in report["checks"] if re.match(r"PD[3-6]\d\d$", c["code"])}


def main():
    readings = sorted(d for d in os.listdir(OUT) if os.path.isdir(f"{OUT}/{d}"))
    if "boot" not in readings:
        FAILS.append(f"no boot reading in {OUT}")
    verdicts = {}
    per_core = {}
    for name in readings:
        d = f"{OUT}/{name}"
        for step, ok in (("collect", {"0"}), ("doctor", {"0", "1", "2"}), ("record", {"0"})):
            rc = read(f"{d}/{step}.rc").strip() if os.path.exists(f"{d}/{step}.rc") else "missing"
            CHECKED.append(f"{name}: {step} exit code")
            if rc not in ok:
                log = f"{d}/{step}.err" if step != "record" else f"{d}/record.log"
                FAILS.append(f"{name}: {step} exited {rc}: {read(log)[-1500:] if os.path.exists(log) else ''}")
        for err in ("collect.err", "doctor.err", "record.log"):
            if os.path.exists(f"{d}/{err}") and "panicked" in read(f"{d}/{err}"):
                FAILS.append(f"{name}: a panic in {err}: {read(f'{d}/{err}')[-1500:]}")
        try:
            live = json.loads(read(f"{d}/collect.json"))
            report = json.loads(read(f"{d}/doctor.json"))
            replay = json.loads(read(f"{d}/replay.json"))
            replay_report = json.loads(read(f"{d}/doctor.replay.json"))
        except (OSError, ValueError) as e:
            FAILS.append(f"{name}: unreadable output: {e}")
            continue
        try:
            k = kernel_facts(f"{d}/tree")
        except (OSError, ValueError, AttributeError, TypeError) as e:
            FAILS.append(f"{name}: the recorded tree lacks a kernel file or has an unexpected one: {e!r}")
            continue
        check_kernel(f"{name} collect", live, k)
        check_kernel(f"{name} doctor", report["snapshot"], k)
        check_replay(name, live, replay)
        verdicts[name] = host_verdicts(report)
        expect(f"{name}: host verdicts of the native doctor on the tree", host_verdicts(replay_report), verdicts[name])
        per_core[name] = k["threads_per_core"]
        print(f"  {name}: {k['arch']}, {k['threads']} threads = {k['cores']} cores x {k['threads_per_core']}, "
              f"{len(k['nodes'])} NUMA nodes, {k['page'] // 1024} KiB pages, page sizes "
              f"{[s // 1024 for s in k['page_sizes']]} KiB, THP {k['thp_enabled']}; host verdicts "
              + ", ".join(f"{c} {s}" for c, s in sorted(verdicts[name].items()) if s != "not_applicable"))
    check_counters(f"{OUT}/boot")
    if "smt-off" in verdicts and CONFIG == "ppc64le":
        expect("boot: threads per core before the siblings went offline", per_core.get("boot", 0) > 1, True)
        expect("smt-off: threads per core after", per_core.get("smt-off"), 1)
        expect("boot: PD405 smt-disabled with SMT on", verdicts["boot"].get("PD405"), "pass")
        expect("smt-off: PD405 smt-disabled follows SMT off", verdicts["smt-off"].get("PD405"), "fail")
    print(f"  {CONFIG}: {len(CHECKED)} comparisons, {len(FAILS)} mismatches")
    for f in FAILS:
        print(f"  MISMATCH: {f}")
    sys.exit(1 if FAILS else 0)


main()
