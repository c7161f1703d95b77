"""An independent reading of rendered ``tc`` commands: where does a packet go, and when is it served?

``TcPlan.classify`` lives in the code under test, so a plan that is wrong in
its structure (bands reversed, HTB's default class, the prio qdisc's priomap)
still agrees with itself. This module reads only the text of the ``tc``
commands a plan renders (what a human would type, and what the netlink
applier mirrors) and evaluates them the way the kernel does:

* HTB (``sch_htb``): the filters attached to the qdisc, lowest ``prio``
  first, pick a class by ``flowid``; no match sends the packet to the
  ``default`` class (a hex minor, as ``tc`` reads it); a class with a qdisc
  attached hands the packet to that qdisc. Between leaf classes whose
  guaranteed ``rate`` is tiny, the lower HTB ``prio`` is served first.
* ``prio`` (``sch_prio``): its own filters pick a band class
  ``major:band+1``; no match uses ``priomap[skb->priority]``, and since a
  socket's ``IP_TOS`` sets ``skb->priority`` (``rt_tos2priority``), every one
  of the 16 entries is tried. Band 0 is served first.
* u32 keys are compared on a synthetic IPv4 header (``match ip dsfield V M``
  on the TOS byte, ``match u32 V M at O`` on the 32-bit word at offset O);
  a filter sees only frames of its ``protocol`` (``ip`` or ``arp``).

:func:`service_key` returns the ranks met on the way to the leaf; a smaller
tuple is served strictly first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TC_PRIO_MAX = 16


@dataclass
class Node:
    kind: str  # qdisc kind, or "class"
    parent: str | None
    params: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Filter:
    prio: int
    order: int
    keys: list[tuple[int, int, int]]  # (value, mask, offset) on 32-bit words
    flowid: str
    protocol: str = "ip"


@dataclass
class TcTree:
    qdiscs: dict[str, Node] = field(default_factory=dict)  # by handle ("1:")
    classes: dict[str, Node] = field(default_factory=dict)  # by classid ("1:10")
    filters: dict[str, list[Filter]] = field(default_factory=dict)  # by parent qdisc handle
    root: str | None = None


def _norm(h: str) -> str:
    """``"1:"`` / ``"1:0"`` -> ``"1:"``, ``"1:010"`` -> ``"1:10"`` (hex, as tc reads handles)."""
    major, _, minor = h.partition(":")
    return f"{int(major, 16):x}:" + (f"{int(minor, 16):x}" if minor and int(minor, 16) else "")


def _opts(tokens: list[str]) -> dict[str, list[str]]:
    """``["bands", "8", "priomap", "7", "7"]`` -> ``{"bands": ["8"], "priomap": ["7", "7"]}``."""
    out: dict[str, list[str]] = {}
    key = None
    for t in tokens:
        if t.isalpha():
            key = t
            out[key] = []
        elif key is not None:
            out[key].append(t)
    return out


def _u32_keys(tokens: list[str]) -> list[tuple[int, int, int]]:
    keys, i = [], 0
    while i < len(tokens):
        if tokens[i : i + 3] == ["match", "ip", "dsfield"]:
            value, mask = int(tokens[i + 3], 16), int(tokens[i + 4], 16)
            keys.append((value << 16, mask << 16, 0))
            i += 5
        elif tokens[i : i + 2] == ["match", "u32"] and tokens[i + 4] == "at":
            keys.append((int(tokens[i + 2], 16), int(tokens[i + 3], 16), int(tokens[i + 5])))
            i += 6
        else:
            raise ValueError(f"unread u32 selector at {tokens[i:]}")
    return keys


def read(lines: list[str]) -> TcTree:
    """Parse ``tc qdisc|class|filter add dev D ...`` lines into a tree."""
    tree = TcTree()
    for n, line in enumerate(lines):
        tok = line.split()
        assert tok[:2] == ["tc", tok[1]] and tok[2] == "add" and tok[3] == "dev", line
        what, rest = tok[1], tok[5:]
        parent = None if rest[0] == "root" else _norm(rest[1])
        rest = rest[1:] if rest[0] == "root" else rest[2:]
        if what == "qdisc":
            assert rest[0] == "handle", line
            handle = _norm(rest[1])
            tree.qdiscs[handle] = Node(rest[2], parent, _opts(rest[3:]))
            if parent is None:
                tree.root = handle
        elif what == "class":
            assert rest[0] == "classid" and rest[2] == "htb", line
            tree.classes[_norm(rest[1])] = Node("class", parent, _opts(rest[3:]))
        else:
            assert rest[0] == "protocol" and rest[1] in ("ip", "arp") and rest[2] == "prio" and rest[4] == "u32", line
            assert rest[-2] == "flowid", line
            flt = Filter(int(rest[3]), n, _u32_keys(rest[5:-2]), _norm(rest[-1]), rest[1])
            tree.filters.setdefault(parent, []).append(flt)
    return tree


def ipv4_header(dscp: int, length: int = 1500, proto: int = 6) -> bytes:
    """The first 12 bytes of an IPv4 header with TOS ``dscp << 2``."""
    return bytes([0x45, dscp << 2, length >> 8, length & 0xFF, 0, 0, 0x40, 0, 64, proto, 0, 0])


def _match(flt: Filter, header: bytes) -> bool:
    words = {o: int.from_bytes(header[o : o + 4], "big") for o in range(0, len(header) - 3, 4)}
    return all(words[o] & m == v for v, m, o in flt.keys)


ARP_FRAME = b"\x00\x01\x08\x00\x06\x04\x00\x01" + bytes(20)  # an ARP request (28 bytes, after Ethernet)


def _protocol(header: bytes) -> str:
    return "arp" if header == ARP_FRAME else "ip"


def _first_match(tree: TcTree, qdisc: str, header: bytes) -> str | None:
    for flt in sorted(tree.filters.get(qdisc, []), key=lambda f: (f.prio, f.order)):
        if flt.protocol == _protocol(header) and _match(flt, header):
            return flt.flowid
    return None


def _htb_rank(tree: TcTree, classid: str) -> int:
    """HTB prio of a leaf; strict between siblings only when their guaranteed rates are tiny."""
    cls = tree.classes[classid]
    siblings = [c for cid, c in tree.classes.items() if c.parent == cls.parent and cid != classid]
    rate, ceil = (_bits(cls.params[k][0]) for k in ("rate", "ceil"))
    assert not siblings or rate * 100 <= ceil, f"class {classid}: rate {rate} is not tiny against ceil {ceil}"
    return int(cls.params.get("prio", ["0"])[0])


def _bits(text: str) -> float:
    assert text.endswith("bit"), text
    return float(text[:-3])


def leaves(tree: TcTree, header: bytes) -> set[tuple[tuple[int, ...], str]]:
    """Every (service key, leaf class) a packet can reach (several when priomap entries differ)."""
    out: set[tuple[tuple[int, ...], str]] = set()
    _walk(tree, tree.root, header, (), out)
    return out


def _walk(tree: TcTree, qdisc: str, header: bytes, key: tuple[int, ...], out: set) -> None:
    node = tree.qdiscs[qdisc]
    target = _first_match(tree, qdisc, header)
    if node.kind == "htb":
        cid = target or _norm(f"{qdisc}{node.params['default'][0]}")
        assert cid in tree.classes, f"packet goes to {cid}: not a class (HTB's unshaped direct queue)"
        assert not any(c.parent == cid for c in tree.classes.values()), f"{cid} is not a leaf"
        _leaf(tree, cid, header, (*key, _htb_rank(tree, cid)), out)
    elif node.kind == "prio":
        bands = int(node.params["bands"][0])
        priomap = [int(b) for b in node.params["priomap"]]
        assert len(priomap) == TC_PRIO_MAX and all(0 <= b < bands for b in priomap)
        choices = [target] if target else [f"{qdisc}{b + 1:x}" for b in priomap]
        for cid in choices:
            band = int(cid.split(":")[1], 16) - 1
            assert 0 <= band < bands, f"{cid} is not a band of {qdisc}"
            _leaf(tree, cid, header, (*key, band), out)
    else:
        raise AssertionError(f"no reading of a {node.kind} qdisc with classes")


def _leaf(tree: TcTree, cid: str, header: bytes, key: tuple[int, ...], out: set) -> None:
    child = next((h for h, q in tree.qdiscs.items() if q.parent == cid), None)
    if child is not None and tree.qdiscs[child].kind in ("htb", "prio"):
        _walk(tree, child, header, key, out)
    else:
        out.add((key, cid))


def service_key(tree: TcTree, header: bytes) -> tuple[int, ...]:
    """The one service key of a packet; fails when the packet could land in different places."""
    found = leaves(tree, header)
    keys = {k for k, _ in found}
    assert len(keys) == 1, f"packet lands in {sorted(found)}"
    return keys.pop()


def leaf_qdisc(tree: TcTree, header: bytes) -> Node | None:
    """The qdisc holding a packet at the end of its way (None: the class's default queue)."""
    found = leaves(tree, header)
    assert len(found) == 1, f"packet lands in {sorted(found)}"
    ((_, cid),) = found
    return next((q for q in tree.qdiscs.values() if q.parent == cid), None)
