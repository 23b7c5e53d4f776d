"""Pure text predicates shared by the scorers' checks, the executor's result check and the
quality benchmark: normalised stemmed words, similarity of two titles, placeholders,
non-words, language and sentence boundaries. No I/O, no model: cheap enough to run on every
proposal.

English is assumed for stemming and for the language check (the prompts are English and ask
for English answers); a goal in another language simply skips the language check.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

import snowballstemmer

_STEMMER = snowballstemmer.stemmer("english")

# Function words and verbs so generic that two titles sharing only them share nothing: "plan
# the trip" and "plan the budget" are different tasks, "go to Tokyo" and "visit Tokyo" are not.
STOPWORDS = frozenset(
    """a an and are as at be by for from in into is it its of on or the to with your you this
    that these those our my their his her we i me us them they he she will would should can
    could may might must shall do does did done doing have has had having get gets got make
    makes made making plan plans planning task tasks step steps part parts item items all any
    each every some more most other such own same so than too very just also about over under
    up down out off again then once here there when where why how what which who whom whose
    go going goes went visit visiting stay staying set setting take taking prepare preparing
    organise organize organising organizing arrange arranging handle handling manage managing
    decide deciding sort sorting work working start starting create creating new""".split()
)

VAGUE = frozenset(
    "misc miscellaneous other others stuff things thing etc various general tbd todo more "
    "something anything everything".split()
)

# [city], {name}, <date>, {{x}}, ___, XXX, "Lorem ipsum": text a model copied from a template
PLACEHOLDER = re.compile(
    r"\[[^\]]{0,40}\]|\{[^}]{0,40}\}|<[^>]{1,40}>|_{3,}|\bX{3,}\b|\blorem ipsum\b|"
    r"\b(?:insert|your|enter)[ _](?:name|city|date|here|company|location)\b",
    re.IGNORECASE,
)
# "City A", "Company X", "Person B": a model inventing a stand-in instead of a name
STAND_IN = re.compile(
    r"\b(?:City|Town|Company|Person|Client|Country|Venue|Hotel|Supplier|Vendor|Restaurant)"
    r" [A-Z]\b(?![\w'’])"
    # "ABC Contractors", "XYZ Hardware", "Company XYZ", "ABC/XYZ" (read in a kitchen plan), and
    # "John Doe": names a model makes up when it knows none; "ABC" before a lowercase word
    # ("ABC analysis") is left alone
    r"|\b(?:ABC|XYZ)(?:[ /&-]+[A-Z][\w'’]*)+"
    r"|\b(?:City|Town|Company|Client|Venue|Hotel|Supplier|Vendor|Restaurant|Store|Shop|Studio)"
    r" (?:ABC|XYZ)\b(?![\w'’])"
    r"|\b(?:John|Jane) Doe\b"
)
# "123 Elm St, Los Angeles", "PayPal, Inc. at 1234 Elm St" (garage sale, make demo 2026-12-07):
# a made-up street address, in a result (not in a goal or a title: a person may live there)
ADDRESS_STAND_IN = re.compile(
    r"\b(?:123(?:45?)?|456|789) (?:Main|Elm|Oak|Maple|Pine|Cedar|Any(?:where|town)?|Fake|Sample|Example|First|High)"
    r" (?:St|Street|Ave|Avenue|Road|Rd|Lane|Ln|Blvd|Boulevard|Drive|Dr|Way)\b", re.IGNORECASE)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_VOWELS = set("aeiouyàáâäãåèéêëìíîïòóôöõùúûüýÿæœ")

# Frequent English function words: ordinary English prose is about a third of them. Short words
# that are also common in other languages ("i", "do", "no", "z", "w" in Polish) are left out.
ENGLISH_FUNCTION = frozenset(
    """the an and or but of in on at for with from by as is are was were be been being it
    this that these those you your we our they their he she his her my me not does did
    have has had will would can could should may might must if then than there here which
    who what when where how all each every any some one two first next after before about into
    over per up out also only just more most very""".split()
)


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (letters and digits, accents kept)."""
    return [w.casefold() for w in _WORD.findall(unicodedata.normalize("NFC", str(text)))]


_STOP_STEMS: frozenset[str] | None = None


def content_stems(text: str) -> frozenset[str]:
    """Stems of the words that carry meaning (no stop words in any inflection, no one-letter
    words)."""
    global _STOP_STEMS
    if _STOP_STEMS is None:
        _STOP_STEMS = frozenset(stem(w) for w in STOPWORDS)
    out = set()
    for w in tokens(text):
        if (len(w) > 1 or w.isdigit()) and w not in STOPWORDS:
            s = stem(w)
            if s not in _STOP_STEMS:
                out.add(s)
    return frozenset(out)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _distinguishers(a: str, b: str) -> set[str]:
    """Words in one title and not the other that name something: a capitalised word after the
    first, or a number ("Day 1" vs "Day 2", "Tokyo hotel" vs "Kyoto hotel")."""
    def named(text: str) -> set[str]:
        out = set()
        words = list(_WORD.finditer(text))
        for i, m in enumerate(words):
            w = m.group(0)
            # a title's first word is capitalised anyway: a name only as a label ("Kyoto: ...")
            first_label = i == 0 and text[m.end():m.end() + 1] in (":", ",")
            if w.isdigit() or ((i > 0 or first_label) and w[:1].isupper()
                               and w.casefold() not in STOPWORDS):
                out.add(stem(w.casefold()))
        return out

    na, nb = named(a), named(b)
    return (na ^ nb) - (content_stems(a) & content_stems(b))


def similarity(a: str, b: str) -> float:
    """How much two titles say the same, in [0, 1]: the larger of their stemmed-word Jaccard
    and their overlap coefficient (shared words over the shorter title's words, so "Tokyo,
    Japan" inside "Go to Tokyo, Japan and relax" counts). The overlap coefficient is ignored
    when the titles differ by a name or a number, share fewer than two words, or the shared
    words are under half of the longer title (a common topic word is not the same task)."""
    sa, sb = content_stems(a), content_stems(b)
    if not sa or not sb:
        return 1.0 if sa == sb else 0.0
    j = jaccard(sa, sb)
    shared = len(sa & sb)
    if shared >= 2 and 2 * shared >= max(len(sa), len(sb)) and not _distinguishers(a, b):
        return max(j, shared / min(len(sa), len(sb)))
    return j


NEAR_DUPLICATE = 0.6  # similarity at which two titles name the same work


def near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE) -> bool:
    return similarity(a, b) >= threshold


def repeats(title: str, ancestor: str, threshold: float = NEAR_DUPLICATE) -> bool:
    """The subgoal ``title`` only restates ``ancestor`` (equal, nearly equal, or all its meaning
    words already in the ancestor)."""
    st, sa = content_stems(title), content_stems(ancestor)
    if not st:
        return False
    if st <= sa:
        return True
    # the ancestor plus a word or two ("Plan a two-week trip to Japan in spring")
    if sa and sa <= st and len(st - sa) <= max(1, len(sa) // 3):
        return True
    return jaccard(st, sa) >= threshold


def stand_ins(text: str) -> list[str]:
    """Made-up names standing in for real ones: "City A", "ABC Contractors", "John Doe"."""
    return [m.group(0) for m in STAND_IN.finditer(str(text))] + [m.group(0) for m in ADDRESS_STAND_IN.finditer(str(text))]


def placeholders(text: str) -> list[str]:
    text = str(text)
    return [m.group(0) for m in PLACEHOLDER.finditer(text)] + [m.group(0) for m in STAND_IN.finditer(text)]


def _wordlike(w: str) -> bool:
    if w.isdigit():
        return len(w) <= 4  # a year, an amount; not a digit run
    letters = [c for c in w if c.isalpha()]
    if len(letters) < len(w):
        return False  # mixed letters and digits: "2xk9"
    if len(w) > 18:
        return False
    if len(w) >= 3 and not (set(w) & _VOWELS):
        return w in {"tv", "dj", "cv", "pc", "sql", "crm", "html", "css", "pdf", "mvp", "rsvp"}
    if re.search(r"(.)\1\1", w):
        return False  # "aaah", "zzzz"
    return True


def nonword_share(text: str) -> float:
    """Share of tokens that do not look like words (digit runs, letter-digit mixes, no vowels)."""
    ws = tokens(text)
    if not ws:
        return 1.0
    return sum(not _wordlike(w) for w in ws) / len(ws)


def mostly_nonwords(text: str) -> bool:
    ws = tokens(text)
    return not ws or nonword_share(text) > 0.5 or not re.search(r"[^\W\d_]{3}", str(text))


def digit_share(text: str) -> float:
    chars = [c for c in str(text) if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


def long_digit_run(text: str) -> bool:
    """Nine or more digits in a row, separators aside: no date, price or phone looks like that
    in a plan, a degenerate model's output does."""
    return re.search(r"\d(?:[\s.,:/-]?\d){8,}", str(text)) is not None


def looks_english(text: str) -> bool:
    """True for English prose (or text too short to tell). Other-language or pseudo-language
    text has few English function words or many letters outside the Latin-1 range."""
    ws = tokens(text)
    letters = [c for c in str(text) if c.isalpha()]
    if letters:
        foreign = sum(ord(c) > 0x24F or c in "ąęśćżźńłőűřčšžěůď" for c in map(str.lower, letters))
        if foreign / len(letters) > 0.03:
            return False
    if len(ws) < 12:
        return True
    share = sum(w in ENGLISH_FUNCTION for w in ws) / len(ws)
    return share >= 0.12


def english_goal(goal: str) -> bool:
    """Whether the goal is English, so English is the expected answer language."""
    ws = tokens(goal)
    return not ws or looks_english(goal) and any(
        w in ENGLISH_FUNCTION or w in STOPWORDS for w in ws
    )


# Han, kana and Hangul: a Qwen model writing English slips into Chinese mid-word ("a plan for
# action in case of a fire, a坍", measured); in an English answer they are noise
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def without_stray_script(text: str) -> str:
    """An English answer without the CJK characters a small model slipped into it."""
    return "\n".join(re.sub(r"[ \t]{2,}", " ", ln) for ln in _CJK.sub("", text).split("\n"))


_END = re.compile(r"[.!?…][\"'”’)\]]*$")


def ends_at_sentence(text: str) -> bool:
    """The text's last line ends a sentence (a list item ending in a full stop counts)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return bool(lines) and _END.search(lines[-1]) is not None


# a full stop that ends an abbreviation, not a sentence ("e.g. Stripe", "St. Albans", "Mt. Fuji"):
# a lookbehind to put before a sentence end
NOT_AN_ABBREVIATION = (r"(?<!\b[eE]\.g\.)(?<!\b[iI]\.e\.)(?<!\bSt\.)(?<!\bMt\.)(?<!\bM[rs]\.)(?<!\bDr\.)"
                       r"(?<!\bMrs\.)(?<!\bNo\.)(?<!\bvs\.)(?<!\betc\.)(?<!\bapprox\.)(?<!\bincl\.)")


def cut_to_sentence(text: str) -> str:
    """``text`` up to its last sentence boundary; unchanged if it already ends at one, empty if
    it has none."""
    text = str(text).strip()
    if ends_at_sentence(text):
        return text
    best = -1
    for m in re.finditer(r"[.!?…][\"'”’)\]]*(?=\s|$)", text):
        best = m.end()
    return text[:best].rstrip() if best > 0 else ""


def cross_overlaps(titles: Sequence[str], others: Iterable[str],
                   threshold: float = NEAR_DUPLICATE) -> list[tuple[str, str]]:
    """(title, other) pairs where a subgoal repeats a title elsewhere in the plan."""
    others = [o for o in others if str(o).strip()]
    out = []
    for t in titles:
        hit = max(others, key=lambda o: similarity(t, o), default=None)
        if hit is not None and similarity(t, hit) >= threshold:
            out.append((t, hit))
    return out


_GOAL_VERB = re.compile(r"^\s*(?:please\s+)?[A-Za-z]+\s+(?:(?:a|an|the|my|our|your)\s+)?", re.IGNORECASE)


def without_goal_echo(text: str, goal: str) -> str:
    """Each line of a step's result without the goal said again as its object ("Define the
    scope of the charity 5K run in Leeds for 300 runners next May" -> "Define the scope"): the
    1.5B model tacked the goal's whole title onto one action in three, and a plan read as the
    same sentence over and over. Only a phrase naming the whole object of the goal (its title
    after the verb: "charity 5K run in Leeds ...") is taken out, and only after a preposition,
    so what is left is still the action."""
    obj = _GOAL_VERB.sub("", " ".join(str(goal).split())).strip(" .")
    if len(obj.split()) < 3:
        return text
    pat = re.compile(r",?\s+(?:for|of|at|during|in|on)\s+(?:(?:the|a|an|this|our|your)\s+)?"
                     + r"\s+".join(re.escape(w) for w in obj.split()) + r"\b", re.IGNORECASE)
    return "\n".join(pat.sub("", ln) for ln in str(text).splitlines())
