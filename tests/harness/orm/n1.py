"""N+1 queries on two real ORMs, for PD702's test (tests/it/statements.rs).

The three shapes an ORM's lazy loading turns into one statement per row — a forward foreign key
(each book's author), a reverse relation (each author's books) and a many-to-many (each book's
tags) — through Django and through SQLAlchemy, on the same tables; the same pages with each
ORM's eager-loading idiom; and a workload that is not N+1 however hot its lookup: Django's
database cache read once per page by pages of several kinds. Each command prints one line. Run
it through tests/harness/orm.sh, which provides the virtualenv.

    n1.py setup                               create the schema `orm_n1` and its data
    n1.py run ORM SHAPE FANOUT PAGES [fixed]  PAGES pages of FANOUT parent rows each
                                              ORM: django | sqlalchemy
                                              SHAPE: fk | reverse | m2m
                                              fixed: with select_related/prefetch_related
                                              (Django) or joinedload/selectinload (SQLAlchemy)
    n1.py hot PAGES                           pages of three kinds, each reading the cache once

Connection: ORM_PORT (127.0.0.1), ORM_PASSWORD (root); database `orm_n1`.
"""

import os
import sys

import pymysql

pymysql.install_as_MySQLdb()

import django  # noqa: E402
from django.conf import settings  # noqa: E402

DB = "orm_n1"
PORT = int(os.environ["ORM_PORT"])
PASSWORD = os.environ["ORM_PASSWORD"]
settings.configure(
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": DB,
            "USER": "root",
            "PASSWORD": PASSWORD,
            "HOST": "127.0.0.1",
            "PORT": str(PORT),
            "OPTIONS": {"charset": "utf8mb4"},
        }
    },
    CACHES={
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "n1app_cache",
        }
    },
    INSTALLED_APPS=["n1app"],
    DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    USE_TZ=False,
)
django.setup()

from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from n1app.models import Author, Book, Tag  # noqa: E402

AUTHORS = 3000
BOOKS_PER_AUTHOR = 4
TAGS = 60
TAGS_PER_BOOK = 3


def setup():
    admin = pymysql.connect(host="127.0.0.1", port=PORT, user="root", password=PASSWORD)
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS `{DB}`")
        c.execute(f"CREATE DATABASE `{DB}`")
    admin.close()
    with connection.schema_editor() as e:
        for m in (Author, Tag, Book):
            e.create_model(m)
    call_command("createcachetable", verbosity=0)
    Author.objects.bulk_create([Author(id=i + 1, name=f"Author {i}") for i in range(AUTHORS)])
    Tag.objects.bulk_create([Tag(id=i + 1, name=f"tag{i}") for i in range(TAGS)])
    books = AUTHORS * BOOKS_PER_AUTHOR
    # Consecutive books have different authors, so a page of books never repeats one (an
    # identity map would otherwise skip the repeats).
    Book.objects.bulk_create(
        [Book(id=i + 1, title=f"Book {i}", author_id=1 + i % AUTHORS) for i in range(books)],
        batch_size=2000,
    )
    through = Book.tags.through
    through.objects.bulk_create(
        [
            through(book_id=i + 1, tag_id=1 + (i * 7 + k * 13) % TAGS)
            for i in range(books)
            for k in range(TAGS_PER_BOOK)
        ],
        batch_size=5000,
    )
    cache.set("site-config", {"theme": "light"}, None)
    print(f"loaded {AUTHORS} authors, {books} books")


def django_page(shape, fanout, start, fixed):
    """One page: FANOUT parent rows from `start`, and what each row's template reads."""
    n = 0
    if shape == "fk":
        books = Book.objects.filter(id__gte=start).order_by("id")
        if fixed:
            books = books.select_related("author")
        for b in books[:fanout]:
            n += len(b.author.name)
    elif shape == "reverse":
        authors = Author.objects.filter(id__gte=start).order_by("id")
        if fixed:
            authors = authors.prefetch_related("book_set")
        for a in authors[:fanout]:
            n += len(a.book_set.all())
    else:
        books = Book.objects.filter(id__gte=start).order_by("id")
        if fixed:
            books = books.prefetch_related("tags")
        for b in books[:fanout]:
            n += len(b.tags.all())
    return n


def sqlalchemy_pages(shape, fanout, pages, fixed):
    from sqlalchemy import Column, ForeignKey, Integer, String, Table, create_engine, select
    from sqlalchemy.orm import (
        DeclarativeBase,
        Session,
        joinedload,
        relationship,
        selectinload,
    )

    class Base(DeclarativeBase):
        pass

    book_tags = Table(
        "n1app_book_tags",
        Base.metadata,
        Column("id", Integer, primary_key=True),
        Column("book_id", ForeignKey("n1app_book.id")),
        Column("tag_id", ForeignKey("n1app_tag.id")),
    )

    class SAAuthor(Base):
        __tablename__ = "n1app_author"
        id = Column(Integer, primary_key=True)
        name = Column(String(100))
        books = relationship("SABook", back_populates="author")

    class SATag(Base):
        __tablename__ = "n1app_tag"
        id = Column(Integer, primary_key=True)
        name = Column(String(50))

    class SABook(Base):
        __tablename__ = "n1app_book"
        id = Column(Integer, primary_key=True)
        title = Column(String(200))
        author_id = Column(Integer, ForeignKey("n1app_author.id"))
        author = relationship(SAAuthor, back_populates="books")
        tags = relationship(SATag, secondary=book_tags)

    engine = create_engine(f"mysql+pymysql://root:{PASSWORD}@127.0.0.1:{PORT}/{DB}")
    n = 0
    for p in range(pages):
        start = 1 + (p * fanout) % (AUTHORS - fanout)
        # A session per page, as a web request has.
        with Session(engine) as s:
            if shape == "fk":
                q = select(SABook).where(SABook.id >= start).order_by(SABook.id).limit(fanout)
                if fixed:
                    q = q.options(joinedload(SABook.author))
                for b in s.scalars(q):
                    n += len(b.author.name)
            elif shape == "reverse":
                q = select(SAAuthor).where(SAAuthor.id >= start).order_by(SAAuthor.id).limit(fanout)
                if fixed:
                    q = q.options(selectinload(SAAuthor.books))
                for a in s.scalars(q):
                    n += len(a.books)
            else:
                q = select(SABook).where(SABook.id >= start).order_by(SABook.id).limit(fanout)
                if fixed:
                    q = q.options(selectinload(SABook.tags))
                for b in s.scalars(q).unique():
                    n += len(b.tags)
    engine.dispose()
    return n


def run(orm, shape, fanout, pages, fixed):
    if shape not in ("fk", "reverse", "m2m") or fanout < 1 or pages < 1:
        sys.exit(__doc__)
    if orm == "django":
        n = sum(
            django_page(shape, fanout, 1 + (p * fanout) % (AUTHORS - fanout), fixed)
            for p in range(pages)
        )
    elif orm == "sqlalchemy":
        n = sqlalchemy_pages(shape, fanout, pages, fixed)
    else:
        sys.exit(__doc__)
    print(f"{orm} {shape} fan-out {fanout}: {pages} pages{' (fixed)' if fixed else ''} ({n})")


def hot(pages):
    """Pages of three kinds, each reading the site configuration from Django's database cache
    once: the cache lookup runs once per page, as often as the short listing sends rows, but
    it is keyed on cache_key, which no listing carries."""
    n = 0
    for p in range(pages):
        n += len(cache.get("site-config"))
        kind = p % 3
        if kind == 0:
            n += len(list(Book.objects.order_by("id").values("id", "title")[p : p + 20]))
        elif kind == 1:
            # 3 rows for every 3 pages: as many rows as cache reads.
            n += len(list(Author.objects.order_by("id").values("id", "name")[p : p + 3]))
        else:
            n += Tag.objects.count()
    print(f"hot pages {pages} ({n})")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["setup"]:
        setup()
    elif args[:1] == ["run"] and len(args) in (5, 6) and args[4:5] != []:
        run(args[1], args[2], int(args[3]), int(args[4]), args[5:] == ["fixed"])
    elif args[:1] == ["hot"] and len(args) == 2:
        hot(int(args[1]))
    else:
        sys.exit(__doc__)
