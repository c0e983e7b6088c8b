#!/usr/bin/python3
"""Idle connections and lock queues on a throw-away MariaDB, for tests/bench.sh.

Usage: lock-pileup.py PORT PASSWORD IDLE    (Debian's python3 with python3-pymysql)

Opens IDLE idle connections as root over 127.0.0.1:PORT, prints "idle ready", then reads
commands on standard input, one a line, and answers each with one line:

  chain N   a row-lock chain: one transaction holds a row (SELECT ... FOR UPDATE, then idle)
            and N sessions wait for it with an UPDATE (innodb_lock_wait_timeout raised)
            -> "chain ready HOLDER_ID" once N transactions are in LOCK WAIT
  mdl N     a metadata-lock pile-up: one transaction has read a table and stays open, an
            ALTER TABLE waits for it and N - 1 SELECTs wait behind the ALTER
            -> "mdl ready HOLDER_ID" once N sessions wait for the table's metadata lock
  release   ends the holder's transaction and waits for every waiter to finish -> "released"

End of input (or "quit") closes every connection. Tables live in the schema pd_bench_locks.
"""

import resource
import sys
import threading
import time

import pymysql

SCHEMA = "pd_bench_locks"


def connect(port, password, **kw):
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password=password,
                           autocommit=True, **kw)


def wait_for(ctl, sql, n, what):
    with ctl.cursor() as c:
        for _ in range(120):
            # Not faster: InnoDB refreshes its INFORMATION_SCHEMA cache (INNODB_TRX,
            # INNODB_LOCK_WAITS) only when its last read is 100 ms old.
            time.sleep(0.25)
            c.execute(sql)
            if c.fetchone()[0] >= n:
                return
    sys.exit(f"lock-pileup: {what} did not form within 30 s")


def main():
    port, password, idle = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < idle + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, idle + 100), hard))
    ctl = connect(port, password)
    with ctl.cursor() as c:
        c.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        c.execute(f"CREATE OR REPLACE TABLE {SCHEMA}.rowlock (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        c.execute(f"INSERT INTO {SCHEMA}.rowlock VALUES (1, 0)")
        c.execute(f"CREATE OR REPLACE TABLE {SCHEMA}.mdl (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        c.execute(f"INSERT INTO {SCHEMA}.mdl VALUES (1, 0)")
    idle_conns = [connect(port, password) for _ in range(idle)]
    print("idle ready", flush=True)

    holder = None
    threads = []
    alters = 0

    def waiter(sqls):
        conn = connect(port, password)
        try:
            with conn.cursor() as c:
                for s in sqls:
                    c.execute(s)
                    c.fetchall()
        finally:
            conn.close()

    def start(sqls):
        t = threading.Thread(target=waiter, args=(sqls,), daemon=True)
        t.start()
        threads.append(t)

    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "chain":
            n = int(cmd[1])
            holder = connect(port, password)
            with holder.cursor() as c:
                c.execute("BEGIN")
                c.execute(f"SELECT * FROM {SCHEMA}.rowlock WHERE id = 1 FOR UPDATE")
                c.fetchall()
            for _ in range(n):
                start(["SET SESSION innodb_lock_wait_timeout = 3600",
                       f"UPDATE {SCHEMA}.rowlock SET v = v + 1 WHERE id = 1"])
            wait_for(ctl, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'",
                     n, "the row-lock chain")
            print(f"chain ready {holder.thread_id()}", flush=True)
        elif cmd[0] == "mdl":
            n = int(cmd[1])
            holder = connect(port, password)
            with holder.cursor() as c:
                c.execute("BEGIN")
                c.execute(f"SELECT * FROM {SCHEMA}.mdl")
                c.fetchall()
            alters += 1
            start([f"ALTER TABLE {SCHEMA}.mdl COMMENT = 'pile-up {alters}'"])
            wait_for(ctl, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock'",
                     1, "the ALTER's wait")
            for _ in range(n - 1):
                start([f"SELECT * FROM {SCHEMA}.mdl"])
            wait_for(ctl, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock'",
                     n, "the metadata-lock pile-up")
            print(f"mdl ready {holder.thread_id()}", flush=True)
        elif cmd[0] == "release":
            if holder is not None:
                holder.rollback()
                holder.close()
                holder = None
            for t in threads:
                t.join(60)
            threads.clear()
            print("released", flush=True)
        else:
            sys.exit(f"lock-pileup: unknown command {cmd[0]!r}")

    for conn in idle_conns:
        conn.close()
    ctl.close()


if __name__ == "__main__":
    main()
