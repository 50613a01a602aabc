"""Shortest-ish double formatting exactly as nlohmann::json's ``dump()`` does it (Grisu2).

nlohmann formats a double with Grisu2 (``detail::dtoa_impl``), which finds digits that round-trip
but -- unlike Python's ``repr`` -- not always the shortest or the closest ones (e.g. it prints
``948448863428139.7`` where ``repr`` gives ``948448863428139.8``). This module runs the same
algorithm on Python integers with the same 64-bit wrap-arounds.

What enters: a finite, positive float. What leaves: ``(digits, decimal_exponent)`` with
``value == int(digits) * 10**decimal_exponent`` in nlohmann's sense (:func:`grisu2`).
"""

from __future__ import annotations

import struct

__all__ = ["grisu2"]

_M64 = (1 << 64) - 1
_ALPHA = -60

# (f, e, k): normalized cached powers c = f * 2^e ~= 10^k, nlohmann's kCachedPowers table
_CACHED_POWERS = [
    (0xAB70FE17C79AC6CA, -1060, -300),
    (0xFF77B1FCBEBCDC4F, -1034, -292),
    (0xBE5691EF416BD60C, -1007, -284),
    (0x8DD01FAD907FFC3C, -980, -276),
    (0xD3515C2831559A83, -954, -268),
    (0x9D71AC8FADA6C9B5, -927, -260),
    (0xEA9C227723EE8BCB, -901, -252),
    (0xAECC49914078536D, -874, -244),
    (0x823C12795DB6CE57, -847, -236),
    (0xC21094364DFB5637, -821, -228),
    (0x9096EA6F3848984F, -794, -220),
    (0xD77485CB25823AC7, -768, -212),
    (0xA086CFCD97BF97F4, -741, -204),
    (0xEF340A98172AACE5, -715, -196),
    (0xB23867FB2A35B28E, -688, -188),
    (0x84C8D4DFD2C63F3B, -661, -180),
    (0xC5DD44271AD3CDBA, -635, -172),
    (0x936B9FCEBB25C996, -608, -164),
    (0xDBAC6C247D62A584, -582, -156),
    (0xA3AB66580D5FDAF6, -555, -148),
    (0xF3E2F893DEC3F126, -529, -140),
    (0xB5B5ADA8AAFF80B8, -502, -132),
    (0x87625F056C7C4A8B, -475, -124),
    (0xC9BCFF6034C13053, -449, -116),
    (0x964E858C91BA2655, -422, -108),
    (0xDFF9772470297EBD, -396, -100),
    (0xA6DFBD9FB8E5B88F, -369, -92),
    (0xF8A95FCF88747D94, -343, -84),
    (0xB94470938FA89BCF, -316, -76),
    (0x8A08F0F8BF0F156B, -289, -68),
    (0xCDB02555653131B6, -263, -60),
    (0x993FE2C6D07B7FAC, -236, -52),
    (0xE45C10C42A2B3B06, -210, -44),
    (0xAA242499697392D3, -183, -36),
    (0xFD87B5F28300CA0E, -157, -28),
    (0xBCE5086492111AEB, -130, -20),
    (0x8CBCCC096F5088CC, -103, -12),
    (0xD1B71758E219652C, -77, -4),
    (0x9C40000000000000, -50, 4),
    (0xE8D4A51000000000, -24, 12),
    (0xAD78EBC5AC620000, 3, 20),
    (0x813F3978F8940984, 30, 28),
    (0xC097CE7BC90715B3, 56, 36),
    (0x8F7E32CE7BEA5C70, 83, 44),
    (0xD5D238A4ABE98068, 109, 52),
    (0x9F4F2726179A2245, 136, 60),
    (0xED63A231D4C4FB27, 162, 68),
    (0xB0DE65388CC8ADA8, 189, 76),
    (0x83C7088E1AAB65DB, 216, 84),
    (0xC45D1DF942711D9A, 242, 92),
    (0x924D692CA61BE758, 269, 100),
    (0xDA01EE641A708DEA, 295, 108),
    (0xA26DA3999AEF774A, 322, 116),
    (0xF209787BB47D6B85, 348, 124),
    (0xB454E4A179DD1877, 375, 132),
    (0x865B86925B9BC5C2, 402, 140),
    (0xC83553C5C8965D3D, 428, 148),
    (0x952AB45CFA97A0B3, 455, 156),
    (0xDE469FBD99A05FE3, 481, 164),
    (0xA59BC234DB398C25, 508, 172),
    (0xF6C69A72A3989F5C, 534, 180),
    (0xB7DCBF5354E9BECE, 561, 188),
    (0x88FCF317F22241E2, 588, 196),
    (0xCC20CE9BD35C78A5, 614, 204),
    (0x98165AF37B2153DF, 641, 212),
    (0xE2A0B5DC971F303A, 667, 220),
    (0xA8D9D1535CE3B396, 694, 228),
    (0xFB9B7CD9A4A7443C, 720, 236),
    (0xBB764C4CA7A44410, 747, 244),
    (0x8BAB8EEFB6409C1A, 774, 252),
    (0xD01FEF10A657842C, 800, 260),
    (0x9B10A4E5E9913129, 827, 268),
    (0xE7109BFBA19C0C9D, 853, 276),
    (0xAC2820D9623BF429, 880, 284),
    (0x80444B5E7AA7CF85, 907, 292),
    (0xBF21E44003ACDD2D, 933, 300),
    (0x8E679C2F5E44FF8F, 960, 308),
    (0xD433179D9C8CB841, 986, 316),
    (0x9E19DB92B4E31BA9, 1013, 324),
]


def _mul(xf: int, xe: int, yf: int, ye: int) -> tuple[int, int]:
    """The upper 64 bits of the 128-bit product, rounded half up (``diyfp::mul``)."""
    u_lo, u_hi = xf & 0xFFFFFFFF, xf >> 32
    v_lo, v_hi = yf & 0xFFFFFFFF, yf >> 32
    p0, p1, p2, p3 = u_lo * v_lo, u_lo * v_hi, u_hi * v_lo, u_hi * v_hi
    q = (p0 >> 32) + (p1 & 0xFFFFFFFF) + (p2 & 0xFFFFFFFF) + (1 << 31)
    return (p3 + (p2 >> 32) + (p1 >> 32) + (q >> 32)) & _M64, xe + ye + 64


def _normalize(f: int, e: int) -> tuple[int, int]:
    shift = 64 - f.bit_length()
    return f << shift, e - shift


def _boundaries(value: float) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    big_e, frac = bits >> 52, bits & ((1 << 52) - 1)
    bias = 1023 + 52
    if big_e == 0:
        vf, ve = frac, 1 - bias
    else:
        vf, ve = frac + (1 << 52), big_e - bias
    lower_closer = frac == 0 and big_e > 1
    plus = _normalize(2 * vf + 1, ve - 1)
    mf, me = (4 * vf - 1, ve - 2) if lower_closer else (2 * vf - 1, ve - 1)
    minus = (mf << (me - plus[1]), plus[1])
    return minus, _normalize(vf, ve), plus


def _cached_power(e: int) -> tuple[int, int, int]:
    f = _ALPHA - e - 1
    product = f * 78913
    quotient = abs(product) >> 18  # C++ integer division truncates toward zero
    k = (quotient if product >= 0 else -quotient) + (1 if f > 0 else 0)
    index = (300 + k + 7) // 8
    return _CACHED_POWERS[index]


def _round(digits: list[int], dist: int, delta: int, rest: int, ten_k: int) -> None:
    while rest < dist and delta - rest >= ten_k and (rest + ten_k < dist or dist - rest > rest + ten_k - dist):
        digits[-1] -= 1
        rest += ten_k


def _largest_pow10(n: int) -> tuple[int, int]:
    k, pow10 = 1, 1
    while k < 10 and n >= pow10 * 10:
        pow10 *= 10
        k += 1
    return k, pow10


def grisu2(value: float) -> tuple[str, int]:
    """nlohmann's digits and decimal exponent for a finite ``value > 0``."""
    (m_minus, v, m_plus) = _boundaries(value)
    cf, ce, ck = _cached_power(m_plus[1])
    w = _mul(v[0], v[1], cf, ce)
    w_minus = _mul(m_minus[0], m_minus[1], cf, ce)
    w_plus = _mul(m_plus[0], m_plus[1], cf, ce)
    lo_f, hi_f, e = w_minus[0] + 1, w_plus[0] - 1, w_plus[1]
    decimal_exponent = -ck

    delta = (hi_f - lo_f) & _M64
    dist = (hi_f - w[0]) & _M64
    one_f = 1 << -e
    p1 = hi_f >> -e
    p2 = hi_f & (one_f - 1)
    digits: list[int] = []
    n, pow10 = _largest_pow10(p1)
    while n > 0:
        d, p1 = divmod(p1, pow10)
        digits.append(d)
        n -= 1
        rest = (p1 << -e) + p2
        if rest <= delta:
            decimal_exponent += n
            _round(digits, dist, delta, rest, pow10 << -e)
            return "".join(map(str, digits)), decimal_exponent
        pow10 //= 10
    m = 0
    while True:
        p2 *= 10
        digits.append(p2 >> -e)
        p2 &= one_f - 1
        m += 1
        delta = (delta * 10) & _M64
        dist = (dist * 10) & _M64
        if p2 <= delta:
            break
    decimal_exponent -= m
    _round(digits, dist, delta, p2, one_f)
    return "".join(map(str, digits)), decimal_exponent
