#!/usr/bin/env python3
"""An external worker for @jobs, on the Python standard library alone (no packages).

It long-polls a @jobs worker API (`@jobs/http`, `jobsctl serve`) for jobs of one type and runs a
shell script per job:

- the job's payload is the script's standard input (JSON), and in JOB_PAYLOAD; JOB_ID, JOB_TYPE
  and JOB_ATTEMPT are set too, and TRACEPARENT / TRACESTATE when the job carries a trace context
  (which the job's complete, fail and release calls also send on, as W3C headers);
- a line `PROGRESS <json>` the script prints is sent with the next heartbeat;
- the last line `RESULT <json>` it prints is the job's result (else {"exitCode": 0});
- exit code 0 completes the job; 65 (EX_DATAERR) fails it for good (dead-letter area); any other
  fails the attempt, retried after the job's backoff while retries are left.

While the script runs, the lease is extended every third of its length. When an operator cancels
the job (the heartbeat says so) or the lease is lost, the script's whole process group is
terminated (SIGTERM, then SIGKILL after --grace seconds). SIGTERM / SIGINT to this worker stop
it: running scripts are terminated and their jobs released.

    JOBS_TOKEN=... python3 jobs_worker.py --url http://127.0.0.1:8080 --type run-script \\
        --script ./scripts/backup.sh
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

UNRECOVERABLE_EXIT = 65
TAIL = 4000


class ApiError(Exception):
    """An error answer of the API (problem+json): `kind` is lease-lost, cancelled, forbidden..."""

    def __init__(self, status, kind, detail):
        super().__init__("%s %s: %s" % (status, kind, detail))
        self.status = status
        self.kind = kind

    @property
    def lease_lost(self):
        return self.status == 409


class WorkerApi:
    """The worker API's calls: acquire, extend, complete, fail, release."""

    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def call(self, path, body, timeout=30.0, trace=None):
        headers = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json"}
        headers.update(trace or {})
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode("utf-8"),
            method="POST",
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read().decode("utf-8") or "{}")
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            try:
                problem = json.loads(text)
                kind = str(problem.get("type", "error")).replace("urn:jobs:http:", "")
                detail = str(problem.get("detail", text))
            except ValueError:
                kind, detail = "error", text
            raise ApiError(error.code, kind, detail) from None

    def acquire(self, types, max_jobs, lease_ms, wait_ms, worker):
        body = {"types": types, "max": max_jobs, "leaseMs": lease_ms, "waitMs": wait_ms, "worker": worker}
        return self.call("/acquire", body, timeout=wait_ms / 1000.0 + 30)["jobs"]

    def extend(self, job, lease_ms, progress=None):
        body = {"token": job["token"], "leaseMs": lease_ms}
        if progress is not None:
            body["progress"] = progress
        return self.call("/jobs/%s/extend" % job["id"], body)

    def complete(self, job, result=None):
        body = {"token": job["token"], "result": result}
        return self.call("/jobs/%s/complete" % job["id"], body, trace=trace_headers(job))

    def fail(self, job, message, stack=None, unrecoverable=False):
        error = {"message": message}
        if stack:
            error["stack"] = stack
        body = {"token": job["token"], "error": error, "unrecoverable": unrecoverable}
        return self.call("/jobs/%s/fail" % job["id"], body, trace=trace_headers(job))

    def release(self, job):
        return self.call("/jobs/%s/release" % job["id"], {"token": job["token"]}, trace=trace_headers(job))


def trace_headers(job):
    """The W3C trace context stored with the job (@jobs/otel), as the headers of its calls."""
    return {name: job[name] for name in ("traceparent", "tracestate") if job.get(name)}


def log(message):
    sys.stderr.write("[jobs_worker] %s\n" % message)
    sys.stderr.flush()


class ScriptRun:
    """One job: its script's process, heartbeats, and how it ends."""

    def __init__(self, api, job, args, stopping):
        self.api = api
        self.job = job
        self.args = args
        self.stopping = stopping
        self.progress = None
        self.ended_by = None  # "cancelled", "lease-lost" or "stopping"
        self.lock = threading.Lock()
        self.process = None

    def run(self):
        job = self.job
        env = dict(os.environ)
        env.pop("JOBS_TOKEN", None)  # the script never sees the worker's token
        env.update(
            {
                "JOB_ID": job["id"],
                "JOB_TYPE": job["type"],
                "JOB_ATTEMPT": str(job["attempt"]),
                "JOB_PAYLOAD": json.dumps(job["payload"]),
            }
        )
        # The W3C trace context stored with the job (@jobs/otel), for a script that traces.
        for name, value in trace_headers(job).items():
            env[name.upper()] = value
        command = [self.args.shell, self.args.script] if self.args.shell else [self.args.script]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: a cancel kills its children too
        )
        beat = threading.Thread(target=self.heartbeat, daemon=True)
        beat.start()
        stderr_lines = []
        reader = threading.Thread(target=self.read_stderr, args=(stderr_lines,), daemon=True)
        reader.start()
        try:
            self.process.stdin.write(json.dumps(job["payload"]).encode("utf-8"))
            self.process.stdin.close()
        except OSError:
            pass
        result = None
        stdout_tail = []
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("PROGRESS "):
                with self.lock:
                    self.progress = parse_json(line[len("PROGRESS "):])
            elif line.startswith("RESULT "):
                result = parse_json(line[len("RESULT "):])
            else:
                stdout_tail.append(line)
                del stdout_tail[:-50]
        code = self.process.wait()
        reader.join(timeout=5)
        self.finish(code, result, stdout_tail, "".join(stderr_lines)[-TAIL:])

    def read_stderr(self, into):
        for raw in self.process.stderr:
            into.append(raw.decode("utf-8", "replace"))
            del into[:-200]

    def heartbeat(self):
        interval = max(0.05, self.args.lease_ms / 3000.0)
        while self.process.poll() is None:
            time.sleep(interval)
            if self.process.poll() is not None or self.ended_by is not None:
                return
            with self.lock:
                progress, self.progress = self.progress, None
            try:
                answer = self.api.extend(self.job, self.args.lease_ms, progress)
                if answer.get("cancelRequested"):
                    log("job %s: cancel requested, stopping its script" % self.job["id"])
                    self.stop_script("cancelled")
                    return
            except ApiError as error:
                if error.lease_lost:
                    log("job %s: lease lost (%s), stopping its script" % (self.job["id"], error.kind))
                    self.stop_script("lease-lost")
                    return
                log("job %s: heartbeat failed: %s" % (self.job["id"], error))
            except (OSError, urllib.error.URLError) as error:
                log("job %s: heartbeat failed: %s" % (self.job["id"], error))

    def stop_script(self, why):
        self.ended_by = self.ended_by or why
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + self.args.grace
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self, code, result, stdout_tail, stderr_tail):
        job = self.job
        try:
            if self.ended_by == "lease-lost":
                return  # not ours to settle any more: another worker may run it
            if self.ended_by == "stopping":
                self.api.release(job)
                log("job %s: released (worker stopping)" % job["id"])
            elif self.ended_by == "cancelled":
                # The API ends a cancel-requested job as cancelled on any settle call.
                self.api.fail(job, "cancelled by an operator")
            elif code == 0:
                self.api.complete(job, result if result is not None else {"exitCode": 0})
                log("job %s: completed" % job["id"])
            else:
                message = "script exited with code %d" % code if code > 0 else "script killed by signal %d" % -code
                answer = self.api.fail(job, message, stderr_tail or "\n".join(stdout_tail)[-TAIL:], code == UNRECOVERABLE_EXIT)
                log("job %s: failed (%s), %s" % (job["id"], message, answer.get("outcome")))
        except ApiError as error:
            if error.kind == "cancelled":
                log("job %s: cancelled" % job["id"])
            elif error.lease_lost:
                log("job %s: lease lost before it settled: nothing recorded" % job["id"])
            else:
                log("job %s: settling failed: %s" % (job["id"], error))
        except (OSError, urllib.error.URLError) as error:
            log("job %s: settling failed: %s (the lease will lapse and the job run again)" % (job["id"], error))


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run a shell script per job of a @jobs worker API.")
    parser.add_argument("--url", default=os.environ.get("JOBS_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--type", dest="types", action="append", required=True, help="job type (repeatable)")
    parser.add_argument("--script", required=True, help="the script run per job")
    parser.add_argument("--shell", default="sh", help="interpreter of the script ('' runs it directly)")
    parser.add_argument("--lease-ms", type=int, default=30000)
    parser.add_argument("--wait-ms", type=int, default=30000, help="long-poll per acquire")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--worker", default="py-%s-%d" % (socket.gethostname()[:40], os.getpid()))
    parser.add_argument("--max-jobs", type=int, default=0, help="exit after this many jobs (0: never)")
    args = parser.parse_args(argv)
    token = os.environ.get("JOBS_TOKEN")
    if not token:
        parser.error("set JOBS_TOKEN to this worker's bearer token")

    api = WorkerApi(args.url, token)
    stopping = threading.Event()
    running = {}
    started = 0
    exit_code = 0

    def stop(signum, _frame):
        log("signal %d: stopping" % signum)
        stopping.set()
        for _thread, run in list(running.values()):
            if run.process is not None:
                threading.Thread(target=run.stop_script, args=("stopping",), daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("working %s from %s as %s" % (", ".join(args.types), args.url, args.worker))

    while not stopping.is_set():
        for job_id, thread_run in list(running.items()):
            if not thread_run[0].is_alive():
                del running[job_id]
        if args.max_jobs and started >= args.max_jobs:
            if not running:
                break
            time.sleep(0.05)
            continue
        free = args.concurrency - len(running)
        if free <= 0:
            time.sleep(0.05)
            continue
        if args.max_jobs:
            free = min(free, args.max_jobs - started)
        try:
            jobs = api.acquire(args.types, free, args.lease_ms, args.wait_ms, args.worker)
        except ApiError as error:
            if error.status in (400, 401, 403):
                # The token or the types are wrong: trying again will not help.
                log("acquire refused: %s" % error)
                stopping.set()
                exit_code = 2
                break
            log("acquire failed: %s (retrying in 1 s)" % error)
            stopping.wait(1.0)
            continue
        except (OSError, urllib.error.URLError) as error:
            if stopping.is_set():
                break
            log("acquire failed: %s (retrying in 1 s)" % error)
            stopping.wait(1.0)
            continue
        for job in jobs:
            started += 1
            log("job %s: running %s (attempt %d)" % (job["id"], args.script, job["attempt"]))
            run = ScriptRun(api, job, args, stopping)
            thread = threading.Thread(target=run.run)
            thread.start()
            running[job["id"]] = (thread, run)
    for thread, _run in list(running.values()):
        thread.join()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
