#!/usr/bin/python3
"""The dashboard end to end, in headless Chromium (Selenium + chromedriver).

Runs real jobs on this machine's Docker engine (the local engine, no SSH):
one that finishes, a job array of 3 members (one fails twice: 2 attempts)
and one that prints a line every 0.2 s per node until it is stopped. Then
`barge ui --hosts local` serves them and Chromium checks that
  - the jobs page lists the finished and the running job, and the array as
    one row with its counts (its members' jobs not one by one),
  - the array's page lists its 3 members and their 4 attempts, each on the
    local host with its exit code,
  - the hosts page shows the local host held by the running job, from the
    store and from the host itself (`barge hosts`), and no longer once the
    job is stopped,
  - the running job's timeline SVG has one row per node,
  - live log lines appear while the job runs,
  - the stop button ends the job (and its containers are gone),
and plain HTTP checks that a request without the token (or outside the
dashboard's secret root path) gets 401, on loopback too, and one with a
wrong Host header is refused. The printed URL (ROOT/?token=TOKEN, ROOT being
/s/ and 32 hex digits, new per start) logs the browser in once: it gets
the cookie barge_ui (Path=ROOT, HttpOnly, SameSite=Strict) and moves on to
ROOT/ without the token; the same URL from a client without the cookie
gets 401 after that.
Screenshots go to OUT_DIR (under the build directory).

Usage: dashboard_test.py --barge BARGE --source SOURCE_DIR --out OUT_DIR
       [--screenshot PNG]   (only take the README's screenshot of the job page)
Fails loudly (exit 1) when chromium, chromedriver, selenium or Docker is missing.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
IMAGE = "barge/test:local"

FINISHED_JOB = f"""name: ui-done
image: {IMAGE}
hosts:
  - address: local
    nodes: 2
ssh:
  dead_after: 60s
command: |
  echo "rank $BARGE_NODE_RANK says hello"
  echo "rank $BARGE_NODE_RANK: a line on stderr" >&2
  sleep 1
  echo "rank $BARGE_NODE_RANK done"
"""

ARRAY_JOB = f"""name: ui-array
image: {IMAGE}
hosts:
  - address: local
ssh:
  dead_after: 60s
stop_grace: 1s
array:
  matrix: {{n: [0, 1, 2]}}
array_retries: 1
command: echo "member $n"; [ "$n" = 1 ] && exit 3; exit 0
"""

LIVE_JOB = f"""name: ui-live
image: {IMAGE}
hosts:
  - address: local
    nodes: 2
# The suite runs tests side by side on 2 cores: a `docker version` slower
# than the default 10 s must not make the local engine "lost" here.
ssh:
  dead_after: 60s
stop_grace: 2s
command: |
  trap 'echo "rank $BARGE_NODE_RANK: got TERM"; exit 0' TERM
  i=0
  while [ $i -lt 1500 ]; do
    echo "tick $i of rank $BARGE_NODE_RANK"
    if [ $((i % 10)) = 3 ]; then echo "warning $i of rank $BARGE_NODE_RANK" >&2; fi
    i=$((i+1))
    sleep 0.2 & wait
  done
"""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def die(msg):
    print("dashboard_test: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, env, timeout=180, check_rc=True):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}")
    return p


def http_status(port, path, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("GET", path, skip_host=True)
    for k, v in headers.items():
        c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--barge", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--screenshot", help="only take the README screenshot, to this PNG")
    args = ap.parse_args()

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            die(f"{path} is missing: apt-get install chromium chromium-driver "
                "(scripts/install-deps.sh)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
        from selenium.common.exceptions import StaleElementReferenceException
    except ImportError as e:
        die(f"python3-selenium is missing ({e}): apt-get install python3-selenium")
    if subprocess.run(["docker", "version"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, timeout=30).returncode != 0:
        die("no Docker engine answers (scripts/ensure-docker.sh starts one)")

    os.makedirs(args.out, exist_ok=True)
    home = tempfile.mkdtemp(prefix="barge-ui-home-", dir=args.out)
    env = dict(os.environ, BARGE_HOME=home)
    run([os.path.join(args.source, "samples/build-demo-image.sh"), IMAGE], env, timeout=120)
    done_file = os.path.join(home, "ui-done.yaml")
    live_file = os.path.join(home, "ui-live.yaml")
    array_file = os.path.join(home, "ui-array.yaml")
    with open(done_file, "w") as f:
        f.write(FINISHED_JOB)
    with open(array_file, "w") as f:
        f.write(ARRAY_JOB)
    with open(live_file, "w") as f:
        f.write(LIVE_JOB)

    ui = None
    driver = None
    live_id = None
    try:
        t0 = time.time()
        run([args.barge, "run", done_file], env, timeout=120)
        # Before the live job, which holds the local host until it is stopped.
        arr = run([args.barge, "run", array_file], env, timeout=180, check_rc=False)
        if arr.returncode != 125:
            die(f"the array should fail as its member 1 does (125), got {arr.returncode}:\n{arr.stdout}")
        live_id = run([args.barge, "run", "-d", live_file], env, timeout=120).stdout.split()[-1]
        print(f"jobs ran in {time.time() - t0:.1f}s; live job {live_id}", flush=True)
        jobs = json.loads(run([args.barge, "ls", "--json"], env).stdout)
        done_id = next(j["id"] for j in jobs if j["name"] == "ui-done")
        array = next(j for j in jobs if j.get("kind") == "array" and j["name"] == "ui-array")
        array_id = array["id"]
        member_jobs = {i for m in array["members"] for i in m["job_ids"]}

        # The hosts page also asks the local host itself (as `barge hosts --hosts local`).
        ui = subprocess.Popen([args.barge, "ui", "--listen", "127.0.0.1:0", "--hosts", "local"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = ui.stdout.readline()
        # http://127.0.0.1:PORT/s/HEX/?token=TOKEN: everything is served
        # under the root /s/HEX, new at each start.
        m = re.match(r"barge ui: (http://127\.0\.0\.1:(\d+)(/s/[0-9a-f]{32})/\?token=([0-9a-f]{64}))$",
                     line.strip())
        if not m:
            die(f"barge ui printed {line!r}, not its URL")
        url, port, root, token = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        host = f"127.0.0.1:{port}"
        base = f"http://{host}{root}"  # the dashboard's pages are under it

        # Refusals, on loopback (none of them uses the token up).
        status, _ = http_status(port, "/", {"Host": host})
        check(status == 401, f"a request outside the root gets 401 (got {status})")
        status, _ = http_status(port, f"/?token={token}", {"Host": host})
        check(status == 401, f"the token outside the root gets 401 (got {status})")
        status, _ = http_status(port, f"{root}/", {"Host": host})
        check(status == 401, f"a request under the root without the token gets 401 (got {status})")
        status, _ = http_status(port, f"{root}/jobs/{live_id}", {"Host": host, "Cookie": "barge_ui=wrong"})
        check(status == 401, f"a request with a wrong session cookie gets 401 (got {status})")
        status, _ = http_status(port, f"{root}/?token={token}", {"Host": f"rebind.example:{port}"})
        check(status == 403, f"a request with a wrong Host header is refused, token or not (got {status})")

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1300,1500", "--no-first-run", "--disable-extensions"):
            opts.add_argument(a)
        if os.geteuid() == 0:
            opts.add_argument("--no-sandbox")
        # A profile of the test's own, removed with the test's home (left
        # to itself, the driver leaves a /tmp/.org.chromium.Chromium.* one).
        opts.add_argument("--user-data-dir=" + os.path.join(home, "chromium-profile"))
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        driver.set_page_load_timeout(30)
        # The page re-renders what it shows as the job changes: an element
        # read just as it is replaced is stale, and the wait looks again.
        stale = (StaleElementReferenceException,)
        wait = WebDriverWait(driver, 30, poll_frequency=0.2, ignored_exceptions=stale)

        def job_status(d):
            found = d.find_elements(By.ID, "job-status")
            return found[0].get_attribute("data-status") if found else None

        # The token logs in once: the answer sets the cookie and
        # meta-refreshes to ROOT/ without the token.
        driver.get(url)
        wait.until(lambda d: d.current_url == base + "/")
        wait.until(lambda d: d.find_elements(By.ID, "jobs"))
        check("token=" not in driver.current_url and token not in driver.current_url,
              f"the login moves on to the root without the token ({driver.current_url})")
        cookie = driver.get_cookie("barge_ui")
        check(cookie is not None and cookie.get("path") == root and cookie.get("httpOnly")
              and cookie.get("sameSite") == "Strict",
              f"the browser holds barge_ui with Path=ROOT, HttpOnly, SameSite=Strict ({cookie})")
        check(cookie is None or token not in cookie.get("value", ""), "the cookie does not hold the token")
        session = cookie["value"] if cookie else ""
        status, _ = http_status(port, f"{root}/?token={token}", {"Host": host})
        check(status == 401, f"the spent token URL from a client without the cookie gets 401 (got {status})")
        status, body = http_status(port, f"{root}/jobs/../../etc/passwd",
                                   {"Host": host, "Cookie": f"barge_ui={session}"})
        check(status == 404 and "root:" not in body, f"ROOT/jobs/../../etc/passwd gets 404 (got {status})")
        status, _ = http_status(port, f"{root}/jobs/{done_id}", {"Host": host, "Cookie": f"barge_ui={session}"})
        check(status == 200, f"the session cookie alone serves a page under the root (got {status})")

        rows = {r.get_attribute("data-id"): r.get_attribute("data-status")
                for r in driver.find_elements(By.CSS_SELECTOR, "#jobs tr.job")}
        check(rows.get(done_id) == "succeeded", f"the jobs page lists the finished job {done_id} as succeeded ({rows})")
        check(rows.get(live_id) == "running", f"the jobs page lists the running job {live_id} as running")
        check(not member_jobs & set(rows), f"the array's member jobs are not rows of their own ({member_jobs & set(rows)})")
        arows = driver.find_elements(By.CSS_SELECTOR, "#jobs tr.array")
        check([r.get_attribute("data-id") for r in arows] == [array_id],
              f"the array {array_id} is one row ({[r.get_attribute('data-id') for r in arows]})")
        if arows:
            a = arows[0]
            counts = {k: a.get_attribute("data-" + k) for k in ("succeeded", "failed", "running", "waiting")}
            check(counts == {"succeeded": "2", "failed": "1", "running": "0", "waiting": "0"},
                  f"the array row counts 2 succeeded and 1 failed ({counts})")
            check("array failed: succeeded 2, failed 1" in a.text and "3 members" in a.text,
                  f"the array row reads as in barge ls ({a.text!r})")
        driver.save_screenshot(os.path.join(args.out, "jobs.png"))

        driver.find_element(By.CSS_SELECTOR, f'#jobs tr.array[data-id="{array_id}"] a').click()
        wait.until(lambda d: d.find_elements(By.ID, "members"))
        members = {m.get_attribute("data-index"): (m.get_attribute("data-status"), m.get_attribute("data-attempts"))
                   for m in driver.find_elements(By.CSS_SELECTOR, "#members tr.member")}
        check(members == {"0": ("succeeded", "1"), "1": ("failed", "2"), "2": ("succeeded", "1")},
              f"the array page lists its 3 members with their attempts ({members})")
        attempts = driver.find_elements(By.CSS_SELECTOR, "#attempts tr.attempt")
        seen = sorted((t.get_attribute("data-index"), t.get_attribute("data-attempt"), t.get_attribute("data-status"))
                      for t in attempts)
        check(seen == [("0", "1", "succeeded"), ("1", "1", "failed"), ("1", "2", "failed"), ("2", "1", "succeeded")],
              f"the array page lists every attempt with its job's status ({seen})")
        cells = [[c.text for c in t.find_elements(By.TAG_NAME, "td")] for t in attempts]
        check(all(c[4] == "local" for c in cells) and sorted(c[5] for c in cells) == ["0", "0", "3", "3"],
              f"each attempt shows its host and exit code ({[(c[4], c[5]) for c in cells]})")
        check({t.get_attribute("data-job") for t in attempts} == member_jobs,
              "the attempts are the member jobs `barge ls --json` lists")
        check("members: succeeded 2, failed 1" in driver.find_element(By.ID, "array-counts").text,
              "the array page shows its counts")
        driver.save_screenshot(os.path.join(args.out, "array.png"))
        driver.find_element(By.CSS_SELECTOR, '#attempts tr.attempt[data-index="1"][data-attempt="2"] a').click()
        wait.until(lambda d: d.find_elements(By.ID, "job-status"))
        check(job_status(driver) == "failed", "an attempt links to its job's page")

        # The hosts page, from the header: the live job holds the local host.
        driver.find_element(By.ID, "nav-hosts").click()
        wait.until(lambda d: d.find_elements(By.ID, "stored-hosts"))
        stored = driver.find_elements(By.CSS_SELECTOR,
                                      f'section.host.stored[data-host="local"] tr.hold[data-job="{live_id}"]')
        check(len(stored) == 1, "the hosts page shows, from the store, the local host held by the running job")

        def live_hold(d):
            found = d.find_elements(By.CSS_SELECTOR,
                                    f'section.host.live[data-host="local"] tr.hold[data-job="{live_id}"]')
            if not found:
                d.refresh()  # still being asked (or not yet held): ask again
            return found
        holds = WebDriverWait(driver, 90, poll_frequency=1, ignored_exceptions=stale).until(live_hold)
        what = [h.find_elements(By.TAG_NAME, "td")[0].text for h in holds]
        check("hold host" in what and "lease" in what,
              f"the hosts page shows, from the host itself, the running job's hold and lease ({what})")
        check(not driver.find_elements(By.ID, "live-error"), "barge hosts answered for the hosts page")
        driver.save_screenshot(os.path.join(args.out, "hosts.png"))
        driver.get(f"{base}/jobs/{live_id}")

        wait.until(lambda d: d.find_elements(By.ID, "live-log"))
        tl_rows = driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.tl-row")
        check(len(tl_rows) == 2, f"the timeline SVG has one row per node (2; got {len(tl_rows)})")
        spans = driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.tl-row rect.tl-span")
        check(len(spans) >= 2, f"the timeline rows have spans ({len(spans)})")

        def live_lines(d):
            return [e.text for e in d.find_elements(By.CSS_SELECTOR, "#live-log div")]

        wait.until(lambda d: any("tick" in l for l in live_lines(d)))
        first = live_lines(driver)
        last_tick = max(int(x) for l in first for x in re.findall(r"tick (\d+) ", l))
        wait.until(lambda d: any(f"tick {last_tick + 5} " in l for l in live_lines(d)))
        check(True, f"live log lines appear while the job runs (tick {last_tick} then {last_tick + 5})")
        stderr_lines = driver.find_elements(By.CSS_SELECTOR, "#live-log div.stderr")
        check(any("warning" in e.text and "stderr]" in e.text for e in stderr_lines),
              "stderr lines are marked")
        if args.screenshot:
            driver.save_screenshot(args.screenshot)
            print(f"screenshot: {args.screenshot}")
        driver.save_screenshot(os.path.join(args.out, "job-running.png"))

        t_stop = time.time()
        driver.find_element(By.ID, "stop").click()
        final = WebDriverWait(driver, 90, poll_frequency=0.5, ignored_exceptions=stale).until(
            lambda d: (s := job_status(d)) in ("cancelled", "succeeded", "failed") and s)
        check(final == "cancelled", f"the stop button ends the job: {final} after {time.time() - t_stop:.1f}s")
        check(not driver.find_elements(By.ID, "stop"), "a finished job has no stop button")
        kept = driver.find_elements(By.CSS_SELECTOR, "#kept-log div")
        check(any("got TERM" in e.text for e in kept), "the finished job's page shows its kept log")
        driver.save_screenshot(os.path.join(args.out, "job-stopped.png"))
        left = run(["docker", "ps", "-aq", "--filter", f"label=barge.job={live_id}"], env).stdout.strip()
        check(left == "", f"no container of the stopped job is left ({left!r})")

        # Stopped, it holds the host no more: neither in the store nor on the host.
        def host_freed(d):
            d.get(f"{base}/hosts")
            return (not d.find_elements(By.CSS_SELECTOR, f'tr.hold[data-job="{live_id}"]')
                    and d.find_elements(By.CSS_SELECTOR, 'section.host.live[data-host="local"]'))
        try:
            WebDriverWait(driver, 60, poll_frequency=2, ignored_exceptions=stale).until(host_freed)
            check(True, "once stopped, the job holds the local host no more on the hosts page")
        except Exception:
            check(False, "once stopped, the job holds the local host no more on the hosts page")

        driver.get(f"{base}/jobs/{done_id}")
        tl_rows = driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.tl-row")
        check(len(tl_rows) == 2, f"the finished job's timeline has 2 rows ({len(tl_rows)})")
        text = driver.find_element(By.ID, "kept-log").text
        check("rank 1 says hello" in text and "rank 0 done" in text, "the finished job's kept log is shown")

        tl = run([args.barge, "show", done_id, "--timeline"], env).stdout
        check(len(re.findall(r"^\d+ \S+ local +\|", tl, re.M)) == 2,
              "barge show --timeline prints one bar per node")
    finally:
        if driver:
            driver.quit()
        if ui:
            ui.send_signal(signal.SIGTERM)
            try:
                rc = ui.wait(timeout=15)
                check(rc == 0, f"barge ui exits 0 on SIGTERM (got {rc})")
            except subprocess.TimeoutExpired:
                ui.kill()
                check(False, "barge ui exits on SIGTERM within 15 s")
        # Every job this test started and that still runs (also one whose
        # `run -d` timed out before printing its id, or whose controller the
        # timeout killed: lost) is torn down.
        try:
            listed = subprocess.run([args.barge, "ls", "--json"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
            for j in json.loads(listed or "[]"):
                if j["status"] not in ("succeeded", "failed", "cancelled", "timed_out"):
                    subprocess.run([args.barge, "down", j["id"]], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=120)
        except (subprocess.TimeoutExpired, ValueError) as e:
            print(f"dashboard_test: cleanup: {e}", file=sys.stderr)
    passed = "passed" if not failures else "FAILED"
    print(f"dashboard_test: {passed}" + (": " + "; ".join(failures) if failures else ""))
    if not failures:
        shutil.rmtree(home, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
