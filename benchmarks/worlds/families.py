"""Task families of the synthetic CBR world: paraphrase templates, canonical plans, entity name generators.

Forty families = 8 entity types x 5 relations. Families of the same entity type are *siblings*: their questions
share the entity vocabulary and their plans share the first step, so a selector that matches on the entity or on
generic wording retrieves sibling cases whose plans are wrong for the query (a realistic confusion). Each family
has four paraphrase templates (``{e}`` is the entity) and a canonical plan of three steps; the middle step is the
family's key step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One task family: a relation asked about one kind of entity."""

    name: str
    entity_type: str
    templates: tuple[str, ...]
    plan: tuple[str, ...]  # canonical plan step templates, ``{e}`` = entity


_F = Family

FAMILIES: tuple[Family, ...] = (
    # person
    _F("person_birth_year", "person",
       ("When was {e} born?", "In what year was {e} born?", "What is the birth year of {e}?",
        "{e} was born in which year?"),
       ("Search for a biography of {e}", "Read the date of birth in the biography of {e}",
        "Answer with the birth year only")),
    _F("person_birthplace", "person",
       ("Where was {e} born?", "What is the birthplace of {e}?", "In which town did {e} come into the world?",
        "Name the place of birth of {e}."),
       ("Search for a biography of {e}", "Read the place of birth in the biography of {e}",
        "Answer with the town and country")),
    _F("person_spouse", "person",
       ("Who is the spouse of {e}?", "Who was {e} married to?", "Name the wife or husband of {e}.",
        "Whom did {e} marry?"),
       ("Search for a biography of {e}", "Find the marriage section and the partner of {e}",
        "Answer with the spouse's full name")),
    _F("person_nationality", "person",
       ("What nationality is {e}?", "Which country is {e} a citizen of?", "What is the citizenship of {e}?",
        "{e} holds the passport of which nation?"),
       ("Search for a biography of {e}", "Read the citizenship field for {e}",
        "Answer with the country name")),
    _F("person_occupation", "person",
       ("What is the occupation of {e}?", "What does {e} do for a living?", "What was the profession of {e}?",
        "Which job is {e} known for?"),
       ("Search for a biography of {e}", "Read the occupation listed for {e}",
        "Answer with the profession")),
    # film
    _F("film_director", "film",
       ("Who directed {e}?", "Who was the director of the film {e}?", "Name the filmmaker behind {e}.",
        "{e} was directed by whom?"),
       ("Search the film database for {e}", "Open the crew list of {e} and find the director",
        "Answer with the director's name")),
    _F("film_producer", "film",
       ("Who produced {e}?", "Who was the producer of the film {e}?", "Name the producer of the movie {e}.",
        "{e} was produced by whom?"),
       ("Search the film database for {e}", "Open the crew list of {e} and find the producer",
        "Answer with the producer's name")),
    _F("film_screenwriter", "film",
       ("Who wrote the screenplay of {e}?", "Who was the screenwriter for {e}?",
        "Name the writer of the movie script {e}.", "The script of {e} was written by whom?"),
       ("Search the film database for {e}", "Open the writing credits of {e}",
        "Answer with the screenwriter's name")),
    _F("film_release_year", "film",
       ("When was {e} released?", "In what year did the film {e} come out?", "What is the release year of {e}?",
        "{e} premiered in which year?"),
       ("Search the film database for {e}", "Read the premiere date of {e}",
        "Answer with the release year")),
    _F("film_composer", "film",
       ("Who composed the music for {e}?", "Who wrote the score of the film {e}?",
        "Name the composer of the soundtrack of {e}.", "The music of {e} is by whom?"),
       ("Search the film database for {e}", "Open the music credits of {e}",
        "Answer with the composer's name")),
    # city
    _F("city_country", "city",
       ("In which country is {e}?", "What country is the city of {e} located in?", "{e} lies in which nation?",
        "Which state does the town {e} belong to?"),
       ("Search a gazetteer for {e}", "Read the country field of the {e} entry",
        "Answer with the country name")),
    _F("city_population", "city",
       ("What is the population of {e}?", "How many people live in {e}?", "How many inhabitants does {e} have?",
        "What is the number of residents of the city {e}?"),
       ("Search a gazetteer for {e}", "Read the latest census figure of {e}",
        "Answer with the population number")),
    _F("city_mayor", "city",
       ("Who is the mayor of {e}?", "Who leads the city council of {e}?", "Name the current mayor of {e}.",
        "Which politician governs the town of {e}?"),
       ("Search a gazetteer for {e}", "Open the local government page of {e} and find the mayor",
        "Answer with the mayor's name")),
    _F("city_founded", "city",
       ("When was {e} founded?", "In what year was the city of {e} established?",
        "What is the founding date of {e}?", "{e} was settled in which century?"),
       ("Search a gazetteer for {e}", "Read the history section of {e} for the founding date",
        "Answer with the founding year")),
    _F("city_river", "city",
       ("Which river flows through {e}?", "On what river does {e} stand?", "Name the river of the city {e}.",
        "{e} is built on the banks of which river?"),
       ("Search a gazetteer for {e}", "Read the geography section of {e} for its river",
        "Answer with the river name")),
    # company
    _F("company_founder", "company",
       ("Who founded {e}?", "Who is the founder of the company {e}?", "Name the person who started {e}.",
        "{e} was established by whom?"),
       ("Search the business registry for {e}", "Read the founding team listed for {e}",
        "Answer with the founder's name")),
    _F("company_headquarters", "company",
       ("Where is {e} headquartered?", "In which city are the headquarters of {e}?",
        "Where is the head office of the firm {e}?", "{e} is based in which city?"),
       ("Search the business registry for {e}", "Read the registered office address of {e}",
        "Answer with the headquarters city")),
    _F("company_ceo", "company",
       ("Who is the CEO of {e}?", "Who runs the company {e}?", "Name the chief executive of {e}.",
        "Which executive leads {e}?"),
       ("Search the business registry for {e}", "Read the board filing of {e} for the chief executive",
        "Answer with the CEO's name")),
    _F("company_founding_year", "company",
       ("When was {e} founded?", "In what year was the company {e} incorporated?",
        "What is the incorporation year of {e}?", "{e} has existed since which year?"),
       ("Search the business registry for {e}", "Read the incorporation date of {e}",
        "Answer with the year")),
    _F("company_industry", "company",
       ("What industry is {e} in?", "What does the company {e} make?", "What sector does {e} operate in?",
        "Which market does the firm {e} serve?"),
       ("Search the business registry for {e}", "Read the industry classification code of {e}",
        "Answer with the sector name")),
    # book
    _F("book_author", "book",
       ("Who wrote {e}?", "Who is the author of the book {e}?", "Name the novelist behind {e}.",
        "{e} was written by whom?"),
       ("Search the library catalogue for {e}", "Read the author field of {e}",
        "Answer with the author's name")),
    _F("book_year", "book",
       ("When was {e} published?", "In what year did the book {e} first appear?",
        "What is the publication year of {e}?", "{e} came out in which year?"),
       ("Search the library catalogue for {e}", "Read the first edition date of {e}",
        "Answer with the publication year")),
    _F("book_publisher", "book",
       ("Who published {e}?", "Which publishing house released the book {e}?", "Name the publisher of {e}.",
        "{e} was printed by which press?"),
       ("Search the library catalogue for {e}", "Read the imprint page of {e} for the publisher",
        "Answer with the publisher's name")),
    _F("book_language", "book",
       ("In what language was {e} written?", "What is the original language of the book {e}?",
        "Which language is {e} in?", "{e} was first written in which tongue?"),
       ("Search the library catalogue for {e}", "Read the original language field of {e}",
        "Answer with the language")),
    _F("book_protagonist", "book",
       ("Who is the main character of {e}?", "Who is the protagonist of the book {e}?",
        "Name the hero of the novel {e}.", "The story of {e} follows which character?"),
       ("Search the library catalogue for {e}", "Read a plot summary of {e} and find the protagonist",
        "Answer with the character's name")),
    # band
    _F("band_singer", "band",
       ("Who is the lead singer of {e}?", "Who sings in the band {e}?", "Name the vocalist of {e}.",
        "Which frontman fronts {e}?"),
       ("Search a music encyclopedia for {e}", "Read the member list of {e} for the lead vocalist",
        "Answer with the singer's name")),
    _F("band_formed", "band",
       ("When was {e} formed?", "In what year did the band {e} get together?",
        "What is the formation year of {e}?", "{e} started playing in which year?"),
       ("Search a music encyclopedia for {e}", "Read the origins section of {e} for the formation year",
        "Answer with the year")),
    _F("band_genre", "band",
       ("What genre does {e} play?", "What kind of music does the band {e} make?",
        "Which musical style is {e} known for?", "{e} belongs to which genre?"),
       ("Search a music encyclopedia for {e}", "Read the genre tags of {e}",
        "Answer with the genre")),
    _F("band_label", "band",
       ("Which record label signed {e}?", "What label is the band {e} on?", "Name the record company of {e}.",
        "{e} releases albums through which label?"),
       ("Search a music encyclopedia for {e}", "Read the label history of {e}",
        "Answer with the label name")),
    _F("band_origin", "band",
       ("Where is {e} from?", "Which city does the band {e} come from?", "What is the hometown of {e}?",
        "{e} originated in which place?"),
       ("Search a music encyclopedia for {e}", "Read the origins section of {e} for the hometown",
        "Answer with the city")),
    # team
    _F("team_stadium", "team",
       ("What is the home stadium of {e}?", "Where does the team {e} play home games?",
        "Name the arena of {e}.", "{e} plays its home matches at which venue?"),
       ("Search a sports almanac for {e}", "Read the venue field of {e}",
        "Answer with the stadium name")),
    _F("team_coach", "team",
       ("Who coaches {e}?", "Who is the head coach of the team {e}?", "Name the manager of {e}.",
        "Which coach trains {e}?"),
       ("Search a sports almanac for {e}", "Read the staff list of {e} for the head coach",
        "Answer with the coach's name")),
    _F("team_league", "team",
       ("Which league does {e} play in?", "In what competition does the team {e} compete?",
        "Name the league of {e}.", "{e} is a member of which division?"),
       ("Search a sports almanac for {e}", "Read the competition field of {e}",
        "Answer with the league name")),
    _F("team_founded", "team",
       ("When was {e} founded?", "In what year was the club {e} established?",
        "What is the founding year of the team {e}?", "{e} has played since which year?"),
       ("Search a sports almanac for {e}", "Read the club history of {e} for the founding year",
        "Answer with the year")),
    _F("team_captain", "team",
       ("Who is the captain of {e}?", "Who wears the armband for the team {e}?",
        "Name the club captain of {e}.", "Which player leads {e} on the field?"),
       ("Search a sports almanac for {e}", "Read the squad list of {e} for the captain",
        "Answer with the player's name")),
    # river
    _F("river_length", "river",
       ("How long is the {e}?", "What is the length of the river {e}?", "How many kilometres does the {e} run?",
        "The {e} is how long?"),
       ("Search a geography reference for the {e}", "Read the length figure of the {e}",
        "Answer with the length in kilometres")),
    _F("river_mouth", "river",
       ("Where does the {e} end?", "Into which sea does the river {e} flow?", "What is the mouth of the {e}?",
        "The {e} drains into which body of water?"),
       ("Search a geography reference for the {e}", "Read the mouth field of the {e}",
        "Answer with the body of water")),
    _F("river_source", "river",
       ("Where does the {e} rise?", "What is the source of the river {e}?", "Where does the {e} begin?",
        "The {e} springs from which mountains?"),
       ("Search a geography reference for the {e}", "Read the source field of the {e}",
        "Answer with the source location")),
    _F("river_countries", "river",
       ("Which countries does the {e} cross?", "Through which nations does the river {e} flow?",
        "Name the countries along the {e}.", "The {e} passes through which states?"),
       ("Search a geography reference for the {e}", "Read the basin countries list of the {e}",
        "Answer with the list of countries")),
    _F("river_tributary", "river",
       ("What is the largest tributary of the {e}?", "Which river feeds into the {e}?",
        "Name the main tributary of the river {e}.", "The {e} is joined by which major stream?"),
       ("Search a geography reference for the {e}", "Read the tributaries table of the {e}",
        "Answer with the tributary name")),
)

# Name parts for seeded entity generation. Entities are synthetic, so no answer leaks from pretrained knowledge.
FIRST = ("Ada", "Boris", "Celia", "Dario", "Elin", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaia", "Lorenz",
         "Mira", "Nils", "Oona", "Pavel", "Quinn", "Rosa", "Soren", "Talia", "Umar", "Vera", "Wim", "Xenia",
         "Yusuf", "Zora", "Arvid", "Bettina", "Cosmo", "Dagny")
LAST = ("Albrecht", "Brennan", "Castell", "Dorn", "Eckhart", "Falk", "Gruber", "Halvorsen", "Iversen", "Jaskolski",
        "Kovacs", "Lindqvist", "Marchetti", "Novak", "Okafor", "Petrov", "Quintero", "Rasmussen", "Szabo",
        "Tamura", "Ulrich", "Vasquez", "Weller", "Xu", "Yilmaz", "Zeller", "Amundsen", "Bianchi", "Cerny", "Duval")
ADJ = ("Silent", "Crimson", "Hollow", "Golden", "Frozen", "Distant", "Broken", "Hidden", "Burning", "Quiet",
       "Wandering", "Painted", "Iron", "Velvet", "Lonely", "Electric", "Last", "Paper", "Glass", "Northern")
NOUN = ("Harbor", "Orchard", "Lantern", "Meridian", "Garden", "Signal", "Compass", "Mirror", "Tide", "Summit",
        "Archive", "Empire", "Voyage", "Canyon", "Horizon", "Furnace", "Cathedral", "Ferry", "Kingdom", "Desert")
PLURAL = ("Wolves", "Sparrows", "Engines", "Saints", "Ghosts", "Pilots", "Tigers", "Owls", "Rivals", "Comets")
SYL1 = ("Var", "Kel", "Tor", "Mal", "Bren", "Ost", "Lun", "Dra", "Fen", "Gal", "Hol", "Ir", "Jor", "Kas", "Lem")
SYL2 = ("no", "da", "ri", "ve", "lo", "ta", "mi", "su", "ke", "ra")
SYL3 = ("vik", "burg", "stad", "mont", "dal", "port", "grad", "holm", "field", "ton")
CORP = ("Labs", "Industries", "Holdings", "Systems", "Works", "Dynamics", "Foods", "Logistics")
MASCOT = ("Rovers", "United", "Athletic", "Wanderers", "Falcons", "Giants", "Mariners", "Hornets")
RIVER_SUFFIX = ("a", "el", "ine", "ava", "is")

ENTITY_TYPES: tuple[str, ...] = ("person", "film", "city", "company", "book", "band", "team", "river")


def _town(i: int) -> str:
    return SYL1[i % len(SYL1)] + SYL2[(i // len(SYL1)) % len(SYL2)] + SYL3[(i // (len(SYL1) * len(SYL2))) % len(SYL3)]


def entity_name(entity_type: str, i: int) -> str:
    """The i-th entity name of a type (deterministic; names repeat with a period of a few hundred to 1500)."""
    if entity_type == "person":
        return f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]}"
    if entity_type == "film":
        return f"The {ADJ[i % len(ADJ)]} {NOUN[(i // len(ADJ)) % len(NOUN)]}"
    if entity_type == "city":
        return _town(i)
    if entity_type == "company":
        return f"{SYL1[i % len(SYL1)]}{SYL3[(i // len(SYL1)) % len(SYL3)]} {CORP[(i // 150) % len(CORP)]}"
    if entity_type == "book":
        return f"A {NOUN[i % len(NOUN)]} for {FIRST[(i // len(NOUN)) % len(FIRST)]}"
    if entity_type == "band":
        return f"The {ADJ[i % len(ADJ)]} {PLURAL[(i // len(ADJ)) % len(PLURAL)]}"
    if entity_type == "team":
        return f"{_town(i)} {MASCOT[(i // 1500) % len(MASCOT)]}"
    if entity_type == "river":
        return f"{SYL1[i % len(SYL1)]}{SYL2[(i // len(SYL1)) % len(SYL2)]}{RIVER_SUFFIX[(i // 150) % 5]}".capitalize()
    raise KeyError(entity_type)


ENTITY_PERIOD: dict[str, int] = {
    "person": len(FIRST) * len(LAST), "film": len(ADJ) * len(NOUN), "city": 1500, "company": 150 * len(CORP),
    "book": len(NOUN) * len(FIRST), "band": len(ADJ) * len(PLURAL), "team": 1500 * len(MASCOT), "river": 750,
}
