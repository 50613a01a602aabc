"""StopMatcher and Utf8Stream: the pure-Python pieces of the token loop (no model needed)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from llamact.engine.detokenizer import Utf8Stream
from llamact.engine.stops import StopMatcher

try:
    from hypothesis import assume, given, settings
    from hypothesis import strategies as st

    HAVE_HYPOTHESIS = True
except ImportError:  # pragma: no cover - hypothesis is in the `test` extra
    HAVE_HYPOTHESIS = False


def run_stops(stops: Sequence[str], pieces: Sequence[str]) -> tuple[list[str], bool, str | None]:
    """Feed ``pieces`` like the generator does; returns (emitted pieces, stopped, matched stop)."""
    m = StopMatcher(stops)
    out: list[str] = []
    for piece in pieces:
        text, stopped = m.feed(piece)
        out.append(text)
        if stopped:
            return out, True, m.matched
    out.append(m.flush())
    return out, False, None


def expected_truncation(text: str, stops: Sequence[str]) -> str:
    hits = [text.find(s) for s in stops if s and s in text]
    return text[: min(hits)] if hits else text


# -- StopMatcher ----------------------------------------------------------------------------------


def test_no_stops_passes_everything_through_immediately() -> None:
    m = StopMatcher([])
    for piece in ["Hel", "lo", " wor", "ld", ""]:
        assert m.feed(piece) == (piece, False)
    assert m.flush() == ""
    assert m.matched is None


def test_empty_stop_strings_are_ignored() -> None:
    m = StopMatcher(["", ""])
    assert m.feed("abc") == ("abc", False)
    out, stopped, _ = run_stops(["", "c"], ["ab", "cd"])
    assert "".join(out) == "ab" and stopped


def test_stop_inside_one_piece() -> None:
    out, stopped, matched = run_stops(["END"], ["hello END world"])
    assert out == ["hello "]
    assert stopped and matched == "END"


def test_stop_split_across_pieces() -> None:
    out, stopped, matched = run_stops(["<|end|>"], ["Hi <", "|e", "nd", "|> trailing"])
    assert "".join(out) == "Hi "
    assert stopped and matched == "<|end|>"
    # nothing of the stop string was ever emitted, even partially
    assert all("<" not in piece for piece in out)


def test_stop_split_one_character_per_piece() -> None:
    text = "abc STOP def"
    out, stopped, matched = run_stops(["STOP"], list(text))
    assert "".join(out) == "abc "
    assert stopped and matched == "STOP"


def test_stop_at_the_very_start() -> None:
    out, stopped, matched = run_stops(["###"], ["###", "more"])
    assert out == [""]
    assert stopped and matched == "###"
    out, stopped, _ = run_stops(["###"], ["#", "#", "#"])
    assert "".join(out) == "" and stopped


def test_earliest_stop_wins_whatever_the_list_order() -> None:
    for stops in (["world", "lo"], ["lo", "world"]):
        out, stopped, matched = run_stops(stops, ["hello world"])
        assert "".join(out) == "hel"
        assert stopped and matched == "lo"


def test_earliest_stop_wins_when_split() -> None:
    # "c d" completes after "b c" would, but starts earlier.
    out, stopped, matched = run_stops(["x y z", "b c d"], ["a b", " c", " d", " x y z"])
    assert "".join(out) == "a "
    assert matched == "b c d"


def test_partial_prefix_held_then_released() -> None:
    m = StopMatcher(["STOP"])
    assert m.feed("abc ST") == ("abc ", False)  # "ST" might start STOP: held
    assert m.feed("O") == ("", False)           # "STO" still might
    assert m.feed("RM") == ("STORM", False)     # ruled out: released in order
    assert m.flush() == ""


def test_held_text_released_by_flush_at_end_of_stream() -> None:
    m = StopMatcher(["</answer>"])
    assert m.feed("42 </ans") == ("42 ", False)
    assert m.flush() == "</ans"
    assert m.flush() == ""  # flush empties the buffer


def test_overlapping_prefixes_ab_abc_bc() -> None:
    stops = ["ab", "abc", "bc"]
    # "ab" completes first and is the earliest
    out, stopped, matched = run_stops(stops, ["x", "a", "b", "c"])
    assert "".join(out) == "x" and matched == "ab"
    # only "bc" occurs
    out, stopped, matched = run_stops(stops, ["x", "b", "c"])
    assert "".join(out) == "x" and matched == "bc"
    # "a" held, then ruled out by "d"
    m = StopMatcher(stops)
    assert m.feed("xa") == ("x", False)
    assert m.feed("d") == ("ad", False)
    # "b" alone may start "bc"
    assert m.feed("b") == ("", False)
    assert m.feed("e") == ("be", False)


def test_overlapping_stops_same_start_position() -> None:
    # both start at index 1: the output is the same whichever is reported
    out, stopped, matched = run_stops(["abc", "ab"], ["xabc"])
    assert "".join(out) == "x"
    assert matched in ("ab", "abc")


def test_inner_stop_completing_first_ends_the_stream() -> None:
    """Upstream's per-token rule: the stream ends as soon as the text so far holds a stop, cut at
    the earliest stop it holds. A stop lying inside a longer one can therefore win when it
    completes first, though the longer one would have started earlier."""
    stops = ["\U0001f600", "a\U0001f600a"]
    out, stopped, matched = run_stops(stops, ["xa\U0001f600", "a"])
    assert "".join(out) == "xa" and matched == "\U0001f600"
    out, stopped, matched = run_stops(stops, ["xa\U0001f600a"])
    assert "".join(out) == "x" and matched == "a\U0001f600a"


def test_self_overlapping_stop() -> None:
    # "aab" inside "aaab": the held suffix must re-align after the first "a"
    out, stopped, matched = run_stops(["aab"], list("xaaab"))
    assert "".join(out) == "xa"
    assert matched == "aab"
    out, stopped, _ = run_stops(["abab"], list("ababab"))
    assert "".join(out) == "" and stopped
    out, stopped, _ = run_stops(["abac"], list("ababac"))
    assert "".join(out) == "ab" and stopped


def test_longer_stop_prefix_is_held_while_shorter_stop_not_yet_seen() -> None:
    m = StopMatcher(["hello world", "wor"])
    assert m.feed("hello ") == ("", False)  # could be "hello world"
    text, stopped = m.feed("wo")
    assert not stopped and text == ""  # "hello wo" may still be "hello world"; "wo" may be "wor"
    text, stopped = m.feed("r")
    assert stopped and text == "hello " and m.matched == "wor"


def test_held_text_never_exceeds_longest_stop_minus_one() -> None:
    stops = ["<tool_call>", "###"]
    m = StopMatcher(stops)
    fed = ""
    emitted = ""
    for ch in "some text <tool_ca and # and ## more <tool":
        fed += ch
        text, stopped = m.feed(ch)
        assert not stopped
        emitted += text
        assert fed.startswith(emitted)
        assert len(fed) - len(emitted) <= max(len(s) for s in stops) - 1
    assert emitted + m.flush() == fed


def test_unicode_stops() -> None:
    out, stopped, matched = run_stops(["。", "🛑"], ["こんにちは", "世界🛑", "後"])
    assert "".join(out) == "こんにちは世界"
    assert matched == "🛑"


# -- Utf8Stream -----------------------------------------------------------------------------------

SAMPLE = "a\u00e9\u20ac\U0001f600z\u00df\u4e16\U00010348!"  # 1-, 2-, 3- and 4-byte characters


def longest_complete_prefix(data: bytes) -> str:
    for end in range(len(data), -1, -1):
        try:
            return data[:end].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""  # pragma: no cover


def test_ascii_passes_straight_through() -> None:
    u = Utf8Stream()
    assert u.feed(b"hello") == "hello"
    assert u.pending_bytes == 0
    assert u.flush() == ""


def test_every_single_split_point() -> None:
    data = SAMPLE.encode("utf-8")
    for i in range(len(data) + 1):
        u = Utf8Stream()
        first = u.feed(data[:i])
        assert first == longest_complete_prefix(data[:i]), i
        second = u.feed(data[i:])
        assert first + second == SAMPLE
        assert u.flush() == ""
        assert "\ufffd" not in first + second


def test_every_pair_of_split_points() -> None:
    data = SAMPLE.encode("utf-8")
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1):
            u = Utf8Stream()
            pieces = [u.feed(data[:i]), u.feed(data[i:j]), u.feed(data[j:]), u.flush()]
            assert "".join(pieces) == SAMPLE, (i, j)


def test_byte_by_byte_never_emits_a_partial_character() -> None:
    data = SAMPLE.encode("utf-8")
    u = Utf8Stream()
    out = ""
    for k in range(len(data)):
        piece = u.feed(data[k : k + 1])
        # each piece is whole characters: re-encoding it gives back exactly the bytes it covers
        out += piece
        assert out == longest_complete_prefix(data[: k + 1])
        assert len(out.encode("utf-8")) + u.pending_bytes == k + 1
    assert out == SAMPLE
    assert u.flush() == ""


def test_four_byte_emoji_byte_by_byte() -> None:
    data = "\U0001f600".encode()
    assert len(data) == 4
    u = Utf8Stream()
    outputs = []
    pending = []
    for b in data:
        outputs.append(u.feed(bytes([b])))
        pending.append(u.pending_bytes)
    assert outputs == ["", "", "", "\U0001f600"]
    assert pending == [1, 2, 3, 0]


def test_emoji_sequence_with_joiners_split_byte_by_byte() -> None:
    text = "\U0001f468\u200d\U0001f469\u200d\U0001f467 family"
    u = Utf8Stream()
    out = "".join(u.feed(bytes([b])) for b in text.encode()) + u.flush()
    assert out == text


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\xff", "\ufffd"),
        (b"a\x80b", "a\ufffdb"),                    # stray continuation byte
        (b"a\xfe\xffb", "a\ufffd\ufffdb"),          # bytes that never occur in UTF-8
        (b"\xe2\x82A", "\ufffdA"),                  # lead byte cut short by ASCII
        (b"\xf0\x9f\x98Z", "\ufffdZ"),              # 4-byte sequence cut short
    ],
)
def test_invalid_bytes_become_replacement_characters(data: bytes, expected: str) -> None:
    whole = Utf8Stream()
    assert whole.feed(data) + whole.flush() == expected
    split = Utf8Stream()
    assert "".join(split.feed(bytes([b])) for b in data) + split.flush() == expected


def test_overlong_and_surrogate_encodings_are_replaced() -> None:
    for data in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"):
        u = Utf8Stream()
        out = "".join(u.feed(bytes([b])) for b in data) + u.flush()
        assert out and set(out) == {"\ufffd"}, data
        assert out == data.decode("utf-8", errors="replace")


def test_truncated_sequence_at_flush_becomes_one_replacement_character() -> None:
    for tail in (b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98"):
        u = Utf8Stream()
        assert u.feed(b"ab" + tail) == "ab"
        assert u.pending_bytes == len(tail)
        assert u.flush() == "\ufffd"
        assert u.pending_bytes == 0
        assert u.flush() == ""


def test_valid_text_resumes_after_invalid_bytes() -> None:
    u = Utf8Stream()
    out = u.feed(b"ok \xff") + u.feed("\u00e9".encode()[:1]) + u.feed("\u00e9".encode()[1:] + b" fine")
    assert out + u.flush() == "ok \ufffd\u00e9 fine"


def test_utf8_and_stops_together_like_the_generator() -> None:
    """Byte pieces -> Utf8Stream -> StopMatcher, with the stop split inside a multi-byte char."""
    text = "r\u00e9sum\u00e9 \u2603END tail"
    data = text.encode()
    u, m = Utf8Stream(), StopMatcher(["\u2603END"])
    out = ""
    stopped = False
    for b in data:
        piece, stopped = m.feed(u.feed(bytes([b])))
        out += piece
        if stopped:
            break
    assert stopped
    assert out == "r\u00e9sum\u00e9 "


# -- properties -----------------------------------------------------------------------------------

if HAVE_HYPOTHESIS:

    def split_at(seq: str | bytes, cuts: list[int]) -> list:  # type: ignore[type-arg]
        points = sorted({c % (len(seq) + 1) for c in cuts})
        bounds = [0, *points, len(seq)]
        return [seq[a:b] for a, b in itertools.pairwise(bounds)]

    ALPHABET = st.sampled_from(list("abc ") + ["\u00e9", "\U0001f600"])
    texts = st.text(alphabet=ALPHABET, max_size=40)
    stop_lists = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), max_size=4)
    cut_lists = st.lists(st.integers(min_value=0, max_value=1000), max_size=12)

    def feed_all(stops: list[str], pieces: list[str]) -> tuple[str, bool, str | None]:
        m = StopMatcher(stops)
        emitted = ""
        for piece in pieces:
            out, stopped = m.feed(piece)
            emitted += out
            if stopped:
                return emitted, True, m.matched
        return emitted + m.flush(), False, None

    def nested(stops: list[str]) -> bool:
        """Some stop lies strictly inside another (neither its prefix nor its suffix)."""
        return any(a in b[1:-1] for a in stops for b in stops if a and a != b)

    @settings(max_examples=400, deadline=None)
    @given(text=texts, stops=stop_lists, cuts=cut_lists)
    def test_property_output_is_text_truncated_at_first_stop(text: str, stops: list[str], cuts: list[int]) -> None:
        """Random text, random split points, random stops: the output is the text up to the first
        stop occurrence. (When one stop lies strictly inside another, the inner one can complete
        first and end the stream before the outer one, which starts earlier, is complete; that case
        is the next property's.)"""
        assume(not nested(stops))
        expected = expected_truncation(text, stops)
        m = StopMatcher(stops)
        emitted = ""
        stopped = False
        for piece in split_at(text, cuts):
            out, stopped = m.feed(piece)
            emitted += out
            # never emits anything past the first stop, nor any part of a stop
            assert expected.startswith(emitted)
            if stopped:
                break
        if not stopped:
            emitted += m.flush()
        assert emitted == expected
        assert stopped == any(s in text for s in stops)
        if stopped:
            assert m.matched in stops
            assert text.find(m.matched) == len(emitted)

    @settings(max_examples=400, deadline=None)
    @given(text=texts, stops=stop_lists, cuts=cut_lists)
    def test_property_stops_when_the_first_stop_completes(text: str, stops: list[str], cuts: list[int]) -> None:
        """Any stops (nested ones too): the stream ends at the first piece after which the text
        so far contains a stop, and the output is that text cut at its earliest stop (upstream's
        per-token rule)."""
        pieces = split_at(text, cuts)
        seen = ""
        expected = text
        for piece in pieces:
            seen += piece
            if any(s in seen for s in stops):
                expected = expected_truncation(seen, stops)
                break
        emitted, stopped, matched = feed_all(stops, pieces)
        assert emitted == expected
        assert stopped == any(s in text for s in stops)
        if stopped:
            assert matched is not None and seen.find(matched) == len(emitted)

    @settings(max_examples=300, deadline=None)
    @given(text=st.text(max_size=40), cuts=cut_lists)
    def test_property_utf8_stream_reassembles_any_text(text: str, cuts: list[int]) -> None:
        text = text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
        u = Utf8Stream()
        fed = b""
        out = ""
        for chunk in split_at(text.encode(), cuts):
            fed += chunk
            out += u.feed(chunk)
            assert out == longest_complete_prefix(fed)  # whole characters only, as soon as complete
        assert out + u.flush() == text

    @settings(max_examples=300, deadline=None)
    @given(data=st.binary(max_size=40), cuts=cut_lists)
    def test_property_utf8_stream_equals_one_shot_decode_on_any_bytes(data: bytes, cuts: list[int]) -> None:
        u = Utf8Stream()
        out = "".join(u.feed(chunk) for chunk in split_at(data, cuts)) + u.flush()
        assert out == data.decode("utf-8", errors="replace")

else:  # pragma: no cover

    @pytest.mark.skip(reason="hypothesis is not installed (pip install -e .[test])")
    def test_properties_need_hypothesis() -> None:
        pass
