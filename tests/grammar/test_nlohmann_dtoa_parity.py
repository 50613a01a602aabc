"""nlohmann's double printer (Grisu2, as ``common_json::dump`` writes numbers) against the real one: the
oracle's ``json_dump_doubles`` over 100k+ doubles from a seeded generator, the awkward ones included."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Iterator

import pytest

from llamact.grammar.json_value import dump
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

SEED = 20260115
BATCH = 20_000


def _from_bits(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def _special() -> Iterator[float]:
    """The edges: zeros, subnormals, normal limits, integers around 2**53, powers of ten and of two,
    the format's switch points (1e-5 / 1e15 / 1e16 / 1e21), and classic hard cases."""
    yield from (0.0, -0.0, 5e-324, -5e-324, 1e-323, 2.2250738585072009e-308, 2.2250738585072014e-308,
                1.7976931348623157e308, -1.7976931348623157e308, 4.9406564584124654e-324,
                0.1, 0.2, 0.3, 1 / 3, 2 / 3, 948448863428139.7, 5e-7, 1e-5, 1e-4, 0.001, 1e15, 1e16, 1e17,
                1e21, 1e22, 1e23, 9007199254740993.0, 123456789012345680.0, 2.0**-1074, 2.0**-1022, 2.0**1023)
    for k in range(0, 1000):  # integers near 2**53, where doubles stop holding every integer
        for base in (2**53, 2**54, 2**63, 2**64):
            yield float(base - k)
            yield float(base + k)
    for e in range(-330, 310):  # powers of ten and their neighbours
        try:
            p = float(f"1e{e}")
        except OverflowError:
            continue
        yield p
        yield math.nextafter(p, math.inf)
        yield math.nextafter(p, 0.0)
    for e in range(-1074, 1024):
        yield math.ldexp(1.0, e)
    for bits in range(1, 2000):  # the smallest subnormals, and the largest ones below the normals
        yield _from_bits(bits)
        yield _from_bits(0x000FFFFFFFFFFFFF - bits)


def _random(rng: random.Random, n: int) -> Iterator[float]:
    for i in range(n):
        kind = i % 5
        if kind == 0:  # any finite bit pattern
            while True:
                v = _from_bits(rng.getrandbits(64))
                if math.isfinite(v):
                    break
        elif kind == 1:  # short decimals, as schemas and tools write them
            v = float(f"{rng.randint(-10**6, 10**6)}e{rng.randint(-12, 12)}")
        elif kind == 2:  # uniform in a moderate range
            v = rng.uniform(-1e6, 1e6)
        elif kind == 3:  # random subnormals
            v = _from_bits(rng.getrandbits(52) | (rng.getrandbits(1) << 63))
        else:  # random magnitudes near the top and bottom of the range
            v = math.ldexp(rng.random() + 0.5, rng.choice([rng.randint(-1074, -1000), rng.randint(1000, 1023)]))
        yield -v if rng.random() < 0.5 else v


def _doubles() -> list[float]:
    values = list(_special())
    values += [-v for v in values]
    values += _random(random.Random(SEED), 100_000)
    return values


def test_grisu2_matches_nlohmann_on_100k_doubles(oracle: OracleClient) -> None:
    values = _doubles()
    assert len(values) >= 100_000
    mismatches = []
    for start in range(0, len(values), BATCH):
        batch = values[start:start + BATCH]
        expected = oracle.call("json_dump_doubles", bits=[struct.pack(">d", v).hex() for v in batch])
        assert len(expected) == len(batch)
        for value, want in zip(batch, expected, strict=True):
            got = dump(value)
            if got != want:
                mismatches.append(f"{value!r} ({struct.pack('>d', value).hex()}): nlohmann {want}, llamact {got}")
    assert not mismatches, f"{len(mismatches)} of {len(values)} differ:\n" + "\n".join(mismatches[:20])
