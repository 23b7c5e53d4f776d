"""The benchmark's fixed goals: one per domain, each with the aspects a reader expects a plan
for it to cover. Coverage is measured against these aspects (each a few alternative words,
matched after stemming), never by counting subgoals. Changing a goal or its aspects changes
every score: compare runs only on the same GOALS_VERSION."""

from __future__ import annotations

from dataclasses import dataclass

GOALS_VERSION = 1


@dataclass(frozen=True)
class EvalGoal:
    id: str
    domain: str
    title: str
    description: str
    aspects: dict[str, tuple[str, ...]]  # aspect -> words that show it is covered


GOALS: tuple[EvalGoal, ...] = (
    EvalGoal("japan-trip", "travel", "Plan a two-week trip to Japan",
             "Two adults, first visit, in April, budget about 5000 euros.",
             {"flights": ("flight", "fly", "airport", "airline"),
              "lodging": ("hotel", "ryokan", "hostel", "accommodation", "lodging", "stay"),
              "transport": ("train", "rail", "shinkansen", "pass", "metro", "transport"),
              "cities": ("tokyo", "kyoto", "osaka", "hiroshima", "nara"),
              "budget": ("budget", "cost", "yen", "price", "money"),
              "documents": ("visa", "passport", "insurance")}),
    EvalGoal("warsaw-conference", "events", "Organise a 200-person tech conference in Warsaw",
             "A one-day conference in autumn with talks and workshops.",
             {"venue": ("venue", "hall", "room", "location"),
              "speakers": ("speaker", "talk", "agenda", "programme", "program", "workshop"),
              "tickets": ("ticket", "registration", "attendee", "register"),
              "sponsors": ("sponsor", "partner", "funding"),
              "catering": ("catering", "food", "lunch", "coffee", "drinks"),
              "promotion": ("marketing", "promotion", "promote", "social", "announce")}),
    EvalGoal("online-bakery", "business", "Launch a small online bakery",
             "Home-based, selling bread and cakes in one town, with local delivery.",
             {"products": ("menu", "bread", "cake", "recipe", "product"),
              "shop": ("website", "shop", "store", "online", "order"),
              "permits": ("licence", "license", "permit", "hygiene", "registration", "regulation"),
              "delivery": ("delivery", "deliver", "packaging", "courier", "shipping"),
              "pricing": ("price", "pricing", "cost", "margin"),
              "marketing": ("marketing", "instagram", "social", "customer", "advertis")}),
    EvalGoal("todo-app", "software", "Build a to-do list mobile app",
             "For Android and iOS, with reminders and sync between devices.",
             {"requirements": ("requirement", "feature", "user story", "scope"),
              "design": ("design", "screen", "interface", "ui", "wireframe", "mockup"),
              "storage": ("database", "storage", "backend", "server", "sync", "api"),
              "reminders": ("reminder", "notification"),
              "testing": ("test", "testing", "bug", "qa"),
              "release": ("release", "store", "publish", "deploy", "launch")}),
    EvalGoal("kitchen-renovation", "home", "Renovate a small kitchen",
             "An 8 square metre kitchen in a flat, budget 10000 euros, six weeks.",
             {"budget": ("budget", "cost", "price", "quote"),
              "layout": ("layout", "design", "plan", "measure"),
              "cabinets": ("cabinet", "countertop", "worktop", "cupboard", "shelf"),
              "appliances": ("appliance", "oven", "fridge", "hob", "dishwasher"),
              "utilities": ("plumbing", "electric", "wiring", "sink", "pipe"),
              "contractor": ("contractor", "builder", "plumber", "electrician", "hire")}),
    EvalGoal("calculus-exam", "study", "Prepare for a university calculus exam in six weeks",
             "First-year exam covering limits, derivatives and integrals.",
             {"topics": ("limit", "derivative", "integral", "series", "syllabus", "topic"),
              "schedule": ("schedule", "week", "timetable", "calendar", "daily"),
              "practice": ("practice", "exercise", "problem", "past paper", "mock"),
              "review": ("review", "revise", "revision", "summary", "notes"),
              "help": ("tutor", "office hour", "study group", "professor", "ask")}),
    EvalGoal("10k-race", "health", "Start running to finish a 10 km race in three months",
             "A beginner who can run 2 km today.",
             {"training": ("training", "run", "interval", "pace", "distance", "week"),
              "gear": ("shoe", "gear", "clothing", "watch"),
              "nutrition": ("nutrition", "diet", "eat", "hydration", "water"),
              "recovery": ("rest", "recovery", "injury", "stretch", "sleep"),
              "race": ("race day", "race", "start", "finish", "registration")}),
    EvalGoal("household-budget", "finance", "Create a household budget and build an emergency fund",
             "A family of three with irregular monthly income.",
             {"income": ("income", "salary", "earning"),
              "expenses": ("expense", "spending", "bill", "cost"),
              "savings": ("saving", "save", "emergency fund", "account"),
              "debt": ("debt", "loan", "credit"),
              "tracking": ("track", "spreadsheet", "app", "review", "monthly")}),
    EvalGoal("wedding", "events", "Organise a wedding for 80 guests",
             "In June, outdoors if the weather allows, moderate budget.",
             {"venue": ("venue", "location", "garden", "hall"),
              "guests": ("guest", "invitation", "rsvp", "seating"),
              "catering": ("catering", "food", "menu", "cake", "drinks"),
              "music": ("music", "band", "dj"),
              "photos": ("photographer", "photo", "video"),
              "budget": ("budget", "cost", "deposit"),
              "weather": ("weather", "rain", "tent", "backup")}),
    EvalGoal("data-analyst-job", "career", "Find a new job as a data analyst",
             "Currently an accountant who knows Excel and some SQL.",
             {"cv": ("cv", "resume", "résumé", "cover letter"),
              "skills": ("sql", "python", "skill", "course", "statistics", "tableau", "power bi"),
              "portfolio": ("portfolio", "project", "github"),
              "applications": ("apply", "application", "job board", "posting", "listing"),
              "interviews": ("interview",),
              "networking": ("network", "linkedin", "recruiter", "contact", "referral")}),
    EvalGoal("shelter-fundraiser", "community", "Run a fundraising campaign for a local animal shelter",
             "Raise 15000 euros in two months for a new kennel building.",
             {"target": ("target", "goal", "amount"),
              "donors": ("donor", "donation", "donate", "sponsor"),
              "events": ("event", "fair", "auction", "walk"),
              "outreach": ("social media", "newsletter", "press", "poster", "campaign", "story"),
              "volunteers": ("volunteer", "team", "helper"),
              "reporting": ("report", "thank", "transparen", "update")}),
    EvalGoal("vegetable-garden", "garden", "Plant a vegetable garden in a backyard",
             "A 20 square metre sunny backyard, temperate climate, first time.",
             {"soil": ("soil", "compost", "fertil"),
              "crops": ("seed", "seedling", "tomato", "lettuce", "vegetable", "crop"),
              "layout": ("bed", "layout", "raised", "row", "plot"),
              "watering": ("water", "irrigation", "hose"),
              "pests": ("pest", "slug", "weed", "insect"),
              "harvest": ("harvest", "pick")}),
)


def goal_by_id(goal_id: str, entry: dict | None = None) -> EvalGoal:
    """One of GOALS; a goal given on the command line comes back from its results ``entry``."""
    if entry is not None and entry.get("domain") == "custom":
        return EvalGoal(goal_id, "custom", entry["title"], entry.get("description", ""), {})
    for g in GOALS:
        if g.id == goal_id:
            return g
    raise KeyError(f"no eval goal {goal_id!r}; known: {', '.join(g.id for g in GOALS)}")
