#!/usr/bin/env bash
# 1 GiB (and 4 GiB) from nginx on 127.0.0.1: the engine against `curl -o`, in the same run.
# Wall time, CPU seconds (user+sys) and peak RSS of each, measured the same way (getrusage of
# the child), and the ratios. Prints figures; asserts nothing. Usage: Benchmarks/engine-bench.sh [GiB...]
# BASELINE=/path/to/another/engine-bench adds a row for that build (e.g. the previous commit's),
# measured in the same run, so a change can be compared with what it replaced.
#
# Benchmarks/engine-bench.sh small [RUNS]: 1,000 × 64 KiB into a tmpfs, 64 at once, layer by layer
# (`engine-bench --small`: AsyncHTTPClient alone, with the file written as the service writes it,
# the engine without store or D-Bus, the engine with the store), alternated with curl --parallel and aria2c -i; CPU per task of
# each, and the whole service over D-Bus in the same run (Benchmarks/profile-small.py none: the
# daemon on a private bus, its state on disk, fed by a python3-dbus client).
set -euo pipefail
cd "$(dirname "$0")/.."
small_runs=0
if [ "${1:-}" = small ]; then small_runs=${2:-3}; set --; fi
sizes=("${@:-1 4}")
[ $# -eq 0 ] && sizes=(1 4)
bench=.build/release/engine-bench
[ -x "$bench" ] || swift build -c release --product engine-bench >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/engine-bench.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cleanup() { [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/www" "$work/logs"
cat > "$work/nginx.conf" <<CONF
daemon on; pid $work/nginx.pid; worker_processes 1; error_log $work/logs/error.log;
events { worker_connections 64; }
http { access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen 127.0.0.1:$port; root $work/www; } }
CONF
/usr/sbin/nginx -c "$work/nginx.conf" -p "$work"
measure() {  # prints: wall_s cpu_s peak_rss_MiB
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.run(sys.argv[1:]).returncode
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
if code != 0: sys.exit(f"{sys.argv[1]} failed with {code}")
print(f"{wall:.2f} {usage.ru_utime + usage.ru_stime:.2f} {usage.ru_maxrss / 1024:.1f}")
PY
}
if [ "$small_runs" -gt 0 ]; then
  out=$(mktemp -d /dev/shm/engine-bench-small.XXXXXX)
  trap 'cleanup; rm -rf "$out"' EXIT
  for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/p$i.bin"; done
  base="http://127.0.0.1:$port"
  for i in $(seq 0 999); do echo "$base/p$i.bin"; done > "$work/aria2.list"
  for i in $(seq 0 999); do printf 'url = "%s/p%d.bin"\noutput = "%s/p%d.bin"\n' "$base" "$i" "$out" "$i"; done > "$work/curl.list"
  echo "engine-bench small: $(nproc) cores, 1,000 × 64 KiB into $out (tmpfs), 64 at once"
  for run in $(seq "$small_runs"); do
    for layer in http file engine store; do
      "$bench" --small "$layer" "$base" "$out" 1000
      rm -rf "${out:?}"/*
    done
    [ -x .build/release/downloadsd ] || swift build -c release --product downloadsd >/dev/null
    line=$(/usr/bin/python3 Benchmarks/profile-small.py none 2>/dev/null | grep "tasks in")
    echo "service $line (downloadsd over D-Bus, state on disk)"
    read -r w c _ < <(measure curl -sS --no-progress-meter --parallel -K "$work/curl.list")
    python3 -c "print(f'curl    1000 tasks  wall {$w:.3f} s  CPU {$c:.3f} s  {$c:.3f} ms CPU per task (the whole process)')"
    rm -rf "${out:?}"/*
    read -r w c _ < <(measure aria2c -q -d "$out" -i "$work/aria2.list")
    python3 -c "print(f'aria2c  1000 tasks  wall {$w:.3f} s  CPU {$c:.3f} s  {$c:.3f} ms CPU per task (the whole process)')"
    rm -rf "${out:?}"/*
  done
  exit 0
fi
echo "engine-bench: $(nproc) cores, nginx $(/usr/sbin/nginx -v 2>&1 | cut -d/ -f2), $(curl --version | head -1 | cut -d' ' -f1-2)"
printf "%-6s %-8s %9s %9s %13s\n" size tool wall_s cpu_s peak_rss_MiB
for gib in "${sizes[@]}"; do
  head -c $((gib * 1024 * 1024 * 1024)) /dev/urandom > "$work/www/file.bin"
  url="http://127.0.0.1:$port/file.bin"
  read -r cw cc cr < <(measure curl -sS -o "$work/curl.bin" "$url")
  cmp -s "$work/www/file.bin" "$work/curl.bin" || { echo "curl: bytes differ"; exit 1; }
  rm -f "$work/curl.bin"
  read -r ew ec er < <(measure "$bench" "$url" "$work/engine.bin")
  cmp -s "$work/www/file.bin" "$work/engine.bin" || { echo "engine: bytes differ"; exit 1; }
  rm -f "$work/engine.bin"
  printf "%-6s %-8s %9s %9s %13s\n" "${gib}GiB" curl "$cw" "$cc" "$cr" "${gib}GiB" engine "$ew" "$ec" "$er"
  python3 -c "print(f'{\"\":6} ratio    {$ew/$cw:9.2f} {$ec/max($cc,0.01):9.2f} {$er/$cr:13.2f}   (engine / curl)')"
  if [ -n "${BASELINE:-}" ]; then
    read -r bw bc br < <(measure "$BASELINE" "$url" "$work/baseline.bin")
    cmp -s "$work/www/file.bin" "$work/baseline.bin" || { echo "baseline: bytes differ"; exit 1; }
    rm -f "$work/baseline.bin"
    printf "%-6s %-8s %9s %9s %13s\n" "${gib}GiB" baseline "$bw" "$bc" "$br"
    python3 -c "print(f'{\"\":6} ratio    {$ew/$bw:9.2f} {$ec/max($bc,0.01):9.2f} {$er/$br:13.2f}   (engine / baseline)')"
  fi
  rm -f "$work/www/file.bin"
done
