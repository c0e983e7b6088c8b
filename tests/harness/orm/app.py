"""A small Django application for powerdiag's statement tests (tests/it/statements.rs).

It reproduces the ORM pitfalls of the Patchwork field report against a real MariaDB through
Django's ORM and PyMySQL: an unindexed listing, per-row lookups (N+1), a COUNT over a JOIN
that reads every row, a GROUP BY whose temporary table goes to disk; and their fixes. Each
command prints one line. Run it through tests/harness/orm.sh, which provides the virtualenv.

    app.py setup          create the schema `orm` and load the data (idempotent: drops first)
    app.py bad PAGES      the naive pages
    app.py fix            the fixes: an index, a precomputed count, an index for the grouping
    app.py good PAGES     the same pages written with the fixes (select_related, ...)
    app.py vector-setup   a table of 2,000 vectors with a vector index (MariaDB 11.7+)
    app.py vector N       N k-NN searches over it

Connection: ORM_PORT (127.0.0.1), ORM_PASSWORD (root), ORM_DB (default orm).
"""

import os
import random
import sys

import pymysql

pymysql.install_as_MySQLdb()

import django  # noqa: E402
from django.conf import settings  # noqa: E402

DB = os.environ.get("ORM_DB", "orm")
settings.configure(
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": DB,
            "USER": "root",
            "PASSWORD": os.environ["ORM_PASSWORD"],
            "HOST": "127.0.0.1",
            "PORT": os.environ["ORM_PORT"],
            "OPTIONS": {"charset": "utf8mb4"},
        }
    },
    INSTALLED_APPS=[],
    DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    USE_TZ=False,
)

# Models with an explicit app_label need no installed app for queries and schema edits.
django.setup()

from django.db import connection, models  # noqa: E402
from django.db.models import Count  # noqa: E402


class Project(models.Model):
    linkname = models.CharField(max_length=50, unique=True)
    name = models.CharField(max_length=100)
    patch_count = models.IntegerField(default=0)

    class Meta:
        app_label = "shop"


class Person(models.Model):
    name = models.CharField(max_length=100)
    email = models.CharField(max_length=200)

    class Meta:
        app_label = "shop"


class Patch(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    submitter = models.ForeignKey(Person, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    state = models.IntegerField()
    date = models.DateTimeField()
    msgid = models.CharField(max_length=64)
    content = models.TextField()

    class Meta:
        app_label = "shop"


PATCHES = int(os.environ.get("ORM_PATCHES", "20000"))
PEOPLE = 2000
PAGE = 50


def setup():
    admin = pymysql.connect(
        host="127.0.0.1",
        port=int(os.environ["ORM_PORT"]),
        user="root",
        password=os.environ["ORM_PASSWORD"],
    )
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        c.execute(f"CREATE DATABASE `{DB}`")
    admin.close()
    with connection.schema_editor() as e:
        for m in (Project, Person, Patch):
            e.create_model(m)
    rnd = random.Random(7)
    Project.objects.bulk_create(
        [Project(linkname=f"p{i}", name=f"Project {i}") for i in range(5)]
    )
    Person.objects.bulk_create(
        [Person(name=f"Person {i}", email=f"p{i}@example.org") for i in range(PEOPLE)]
    )
    projects = list(Project.objects.all())
    batch = []
    for i in range(PATCHES):
        # One big project holds most patches, as in Patchwork.
        project = projects[0] if i % 10 else projects[1 + i % 4]
        batch.append(
            Patch(
                project=project,
                submitter_id=1 + rnd.randrange(PEOPLE),
                name=f"[PATCH {i}] fix something",
                state=rnd.randrange(8),
                date=f"2024-01-01 00:00:00",
                msgid=f"<{i % 500}@example.org>",
                content=("diff --git a/x b/x\n" + "+line\n" * 20 + f"{i % 500}"),
            )
        )
        if len(batch) == 2000:
            Patch.objects.bulk_create(batch)
            batch = []
    Patch.objects.bulk_create(batch)
    with connection.cursor() as c:
        c.execute(f"ANALYZE TABLE `{DB}`.`shop_patch`")
    print(f"loaded {PATCHES} patches")


def bad(pages):
    names = 0
    for p in range(pages):
        state = p % 8
        # Listing: filtered and ordered on unindexed columns (a full scan each page).
        listing = Patch.objects.filter(state=state).order_by("-date", "-id")[:PAGE]
        for patch in listing:
            # N+1: one query per row for its submitter.
            names += len(patch.submitter.name)
        # Pagination: a COUNT over the JOIN that reads every patch of the project.
        Patch.objects.filter(project__linkname="p0").count()
        if p % 10 == 0:
            # A report: grouping by the message body (TEXT) builds an on-disk temporary table.
            list(Patch.objects.filter(state=0).values("content").annotate(n=Count("id")).order_by())
    print(f"bad pages {pages} ({names})")


def fix():
    with connection.schema_editor() as e:
        e.add_index(Patch, models.Index(fields=["state", "date", "id"], name="patch_state_date"))
        e.add_index(Patch, models.Index(fields=["msgid"], name="patch_msgid"))
    for project in Project.objects.all():
        project.patch_count = Patch.objects.filter(project=project).count()
        project.save(update_fields=["patch_count"])
    print("fixed")


def good(pages):
    names = 0
    for p in range(pages):
        state = p % 8
        listing = (
            Patch.objects.filter(state=state)
            .select_related("submitter")
            .order_by("-date", "-id")[:PAGE]
        )
        for patch in listing:
            names += len(patch.submitter.name)
        Project.objects.get(linkname="p0").patch_count
        if p % 10 == 0:
            list(Patch.objects.filter(state=0).values("msgid").annotate(n=Count("id")).order_by())
    print(f"good pages {pages} ({names})")


def vector_setup():
    rnd = random.Random(3)
    with connection.cursor() as c:
        c.execute("DROP TABLE IF EXISTS docs")
        c.execute(
            "CREATE TABLE docs (id INT PRIMARY KEY, e VECTOR(8) NOT NULL, VECTOR INDEX (e))"
        )
        rows = [
            (i, "[" + ",".join(f"{rnd.random():.4f}" for _ in range(8)) + "]")
            for i in range(2000)
        ]
        c.executemany("INSERT INTO docs VALUES (%s, VEC_FromText(%s))", rows)
    print("vectors loaded")


def vector(n):
    rnd = random.Random(5)
    with connection.cursor() as c:
        for _ in range(n):
            q = "[" + ",".join(f"{rnd.random():.4f}" for _ in range(8)) + "]"
            c.execute(
                "SELECT id FROM docs ORDER BY VEC_DISTANCE_EUCLIDEAN(e, VEC_FromText(%s)) LIMIT 10",
                [q],
            )
            c.fetchall()
    print(f"vector searches {n}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if cmd == "setup":
        setup()
    elif cmd == "bad":
        bad(arg)
    elif cmd == "fix":
        fix()
    elif cmd == "good":
        good(arg)
    elif cmd == "vector-setup":
        vector_setup()
    elif cmd == "vector":
        vector(arg)
    else:
        sys.exit(__doc__)
