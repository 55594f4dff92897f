"""Static checks of deploy/kubernetes/ (no cluster here): what `kubectl apply -k` would
send is valid against the Kubernetes API schemas, every `bakeoff` flag it passes exists
in the real binary, the Prometheus configuration passes promtool, and the rules the
docs/kubernetes.md promises hold (tokens only from Secret files, non-root, read-only root, probes on
the real routes, names and ports that match across objects).

Run by ctest as kubernetes_manifests_test (labels fast, deploy) in the project's Python
environment, which holds the pinned kubernetes-validate (deploy/requirements-ci.txt;
its schemas ship inside the package, so nothing is fetched). BAKEOFF_BIN names the
`bakeoff` binary whose --help the flags are checked against.
"""

import base64
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import yaml

try:
    import kubernetes_validate
except ImportError as e:  # scripts/setup installs it; say so instead of a bare trace
    raise SystemExit(
        f"kubernetes_manifests_test: {e}: run scripts/setup (it installs deploy/requirements-ci.txt "
        "into the project's Python environment)"
    )

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes docs/kubernetes.md promises, and the newest schemas the pinned
# kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.25.0", kubernetes_validate.latest_version() + ".0")
SECRET_PLACEHOLDER = "not-a-real-token\n"


def load_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def kustomization():
    return load_documents(K8S / "kustomization.yaml")[0]


def generated_objects(kust, base=K8S):
    """The Secrets and ConfigMaps of the kustomization's generators, as kustomize makes
    them (without the hash suffix, which kustomize also adds to every reference). Token
    files are not in git: their Secrets get a placeholder."""
    out = []
    for kind, key in (("Secret", "secretGenerator"), ("ConfigMap", "configMapGenerator")):
        for gen in kust.get(key, []):
            obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}}
            data = {}
            for entry in gen.get("files", []):
                name, _, path = entry.partition("=")
                path = path or name
                name = Path(name).name
                if kind == "Secret":
                    content = (base / path).read_text() if (base / path).exists() else SECRET_PLACEHOLDER
                    data[name] = base64.b64encode(content.encode()).decode()
                else:
                    data[name] = (base / path).read_text()
            if kind == "Secret":
                obj["type"] = gen.get("type", "Opaque")
            obj["data"] = data
            out.append(obj)
    return out


def rendered(base=K8S):
    """Every object `kubectl apply -k` applies: the resources' documents and the
    generated ones, each with the file it came from."""
    kust = load_documents(base / "kustomization.yaml")[0]
    objects = []
    for resource in kust["resources"]:
        for doc in load_documents(base / resource):
            objects.append((resource, doc))
    for obj in generated_objects(kust, base):
        objects.append(("kustomization.yaml", obj))
    return objects


def workloads(objects):
    return [(f, o) for f, o in objects if o["kind"] in ("StatefulSet", "DaemonSet", "Deployment")]


def find(objects, kind, name):
    for _, o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise AssertionError(f"no {kind} named {name} in deploy/kubernetes")


def containers(workload):
    spec = workload["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def bakeoff_invocation(container):
    """(subcommand, args after it) when the container runs `bakeoff`, else None."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    if not argv or Path(argv[0]).name != "bakeoff":
        return None
    return argv[1], argv[2:]


def flag_value(args, flag):
    for i, a in enumerate(args):
        if a == flag:
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def help_flags(binary, subcommand):
    """{flag: takes_value} from `bakeoff SUBCOMMAND --help` (CLI11's option list)."""
    out = subprocess.run([binary, subcommand, "--help"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"{binary} {subcommand} --help exited {out.returncode}: {out.stderr}")
    flags = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^  (?:-\w,)?(--[a-z][a-z0-9-]*)( [A-Z]+\b)?", line)
        if m:
            flags[m.group(1)] = m.group(2) is not None
    if "--help" not in flags or len(flags) < 3:
        raise AssertionError(f"could not read the flags of `bakeoff {subcommand} --help`:\n{out.stdout}")
    return flags


def flag_problems(args, known):
    """Flags in `args` that `known` ({flag: takes_value}) does not have, or used wrongly."""
    problems = []
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            problems.append(f"stray argument {a!r} (a value with no flag before it)")
            i += 1
            continue
        name, has_inline_value = a.split("=", 1)[0], "=" in a
        if name not in known:
            problems.append(f"{name} is not a flag of this subcommand")
            i += 1
            continue
        if known[name] and not has_inline_value:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                problems.append(f"{name} needs a value")
                i += 1
                continue
            i += 2
            continue
        if not known[name] and has_inline_value:
            problems.append(f"{name} is a switch and takes no value")
        i += 1
    return problems


def quantity_bytes(text):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    m = re.fullmatch(r"(\d+)([KMGT]i(?:B)?)", str(text))
    if not m:
        raise AssertionError(f"unexpected size {text!r}")
    return int(m.group(1)) * units[m.group(2)]


class KubernetesManifestsTest(unittest.TestCase):
    def setUp(self):
        self.objects = rendered()

    # --- the schemas ---------------------------------------------------------------

    def assert_valid(self, objects):
        for version in KUBERNETES_VERSIONS:
            for source, obj in objects:
                where = f"{source}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')} (Kubernetes {version})"
                try:
                    kubernetes_validate.validate(obj, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    path = ".".join(str(p) for p in e.path)
                    self.fail(f"{where}: {path}: {e.message}")
                except kubernetes_validate.SchemaNotFoundError as e:
                    self.fail(f"{where}: no schema: {e.message}")

    def test_every_object_validates_against_the_kubernetes_schemas(self):
        self.assertGreaterEqual(len(self.objects), 10)
        self.assert_valid(self.objects)

    def test_the_validator_rejects_a_misspelled_field_and_a_wrong_type(self):
        # The check above is only worth something if the validator says no.
        source, sts = next((f, o) for f, o in self.objects if o["kind"] == "StatefulSet")
        typo = copy.deepcopy(sts)
        typo["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
        wrong_type = copy.deepcopy(sts)
        wrong_type["spec"]["replicas"] = "one"
        for broken in (typo, wrong_type):
            with self.assertRaises(kubernetes_validate.ValidationError):
                kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)

    def test_kustomization_lists_every_manifest_and_its_generator_files_exist(self):
        kust = kustomization()
        manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
        self.assertEqual(set(kust["resources"]), manifests)
        for gen in kust.get("configMapGenerator", []):
            for entry in gen["files"]:
                self.assertTrue((K8S / entry.split("=", 1)[-1]).is_file(), entry)
        # Token files are made by the operator and never committed (tokens/.gitignore).
        ignored = (K8S / "tokens" / ".gitignore").read_text()
        self.assertIn("*", ignored.split())
        for gen in kust["secretGenerator"]:
            for entry in gen["files"]:
                self.assertTrue(entry.split("=", 1)[-1].startswith("tokens/"), entry)

    # --- the bakeoff flags -----------------------------------------------------------

    def test_every_bakeoff_flag_in_the_manifests_exists_in_the_binary(self):
        binary = os.environ.get("BAKEOFF_BIN")
        if not binary:
            self.skipTest("BAKEOFF_BIN is not set (ctest sets it to the built bakeoff)")
        seen = set()
        for source, workload in workloads(self.objects):
            for c in containers(workload):
                call = bakeoff_invocation(c)
                if call is None:
                    continue
                subcommand, args = call
                seen.add(subcommand)
                problems = flag_problems(args, help_flags(binary, subcommand))
                self.assertEqual(problems, [], f"{source}: container {c['name']}: bakeoff {subcommand}")
        self.assertEqual(seen, {"coordinator", "worker"})

    def test_the_flag_check_rejects_an_unknown_flag_and_a_missing_value(self):
        known = {"--db": True, "--metrics-require-token": False, "--help": False}
        self.assertEqual(flag_problems(["--db", "x.db", "--metrics-require-token"], known), [])
        self.assertEqual(len(flag_problems(["--database", "x.db"], known)), 2)
        self.assertEqual(flag_problems(["--db", "--metrics-require-token"], known), ["--db needs a value"])

    # --- credentials -----------------------------------------------------------------

    def secret_mounts(self, workload, container):
        """{mountPath: secretName} of the container's Secret volumes."""
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        out = {}
        for m in container.get("volumeMounts", []):
            v = volumes.get(m["name"], {})  # absent: a volumeClaimTemplate
            if "secret" in v:
                self.assertTrue(m.get("readOnly"), f"{container['name']}: Secret mount {m['mountPath']} not readOnly")
                out[m["mountPath"]] = v["secret"]["secretName"]
        return out

    def secret_of_path(self, mounts, path):
        for mount, secret in mounts.items():
            if path.startswith(mount.rstrip("/") + "/"):
                return secret
        return None

    def test_tokens_come_only_from_secret_files(self):
        generated = {o["metadata"]["name"] for _, o in self.objects if o["kind"] == "Secret"}
        token_flags = {"coordinator": {"--token-file": "bakeoff-submit-token",
                                       "--read-token-file": "bakeoff-read-token",
                                       "--worker-token-file": "bakeoff-worker-token"},
                       "worker": {"--token-file": "bakeoff-worker-token"}}
        for source, workload in workloads(self.objects):
            for c in containers(workload):
                where = f"{source}: container {c['name']}"
                mounts = self.secret_mounts(workload, c)
                for secret in mounts.values():
                    self.assertIn(secret, generated, f"{where} mounts a Secret the kustomization does not make")
                for env in c.get("env", []):
                    self.assertNotIn("TOKEN", env["name"].upper(), f"{where}: a token in the environment")
                for env in c.get("envFrom", []):
                    self.assertNotIn("secretRef", env, f"{where}: a Secret in the environment")
                call = bakeoff_invocation(c)
                if call is None:
                    continue
                subcommand, args = call
                expected = token_flags[subcommand]
                for flag, secret in expected.items():
                    path = flag_value(args, flag)
                    self.assertIsNotNone(path, f"{where}: bakeoff {subcommand} without {flag}")
                    self.assertEqual(self.secret_of_path(mounts, path), secret,
                                     f"{where}: {flag} {path} is not a file of the Secret {secret}")
                # Least privilege: a pod holds only the credentials its flags read.
                self.assertEqual(set(mounts.values()), set(expected.values()), where)

    # --- pods: security, resources, probes ---------------------------------------------

    def test_every_pod_runs_non_root_with_a_read_only_root_and_bounded_memory(self):
        for source, workload in workloads(self.objects):
            pod = workload["spec"]["template"]["spec"]
            self.assertTrue(pod["securityContext"]["runAsNonRoot"], source)
            self.assertNotEqual(pod["securityContext"].get("runAsUser"), 0, source)
            self.assertFalse(pod.get("automountServiceAccountToken", True), f"{source}: no Kubernetes API needed")
            self.assertFalse(pod.get("hostNetwork", False), source)
            for c in containers(workload):
                where = f"{source}: container {c['name']}"
                sc = c["securityContext"]
                self.assertTrue(sc["readOnlyRootFilesystem"], where)
                self.assertFalse(sc["allowPrivilegeEscalation"], where)
                self.assertEqual(sc["capabilities"]["drop"], ["ALL"], where)
                self.assertIn("memory", c["resources"]["requests"], where)
                self.assertIn("memory", c["resources"]["limits"], where)
                if bakeoff_invocation(c) is not None:
                    self.assertIn("/tmp", {m["mountPath"] for m in c.get("volumeMounts", [])}, where)

    def test_writable_paths_of_bakeoff_are_volumes(self):
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        (coord,) = sts["spec"]["template"]["spec"]["containers"]
        (worker,) = ds["spec"]["template"]["spec"]["containers"]
        claims = {t["metadata"]["name"]: t for t in sts["spec"]["volumeClaimTemplates"]}
        db = flag_value(bakeoff_invocation(coord)[1], "--db")
        mount = next(m for m in coord["volumeMounts"] if db.startswith(m["mountPath"] + "/"))
        self.assertIn(mount["name"], claims, "the database is on the PersistentVolumeClaim")
        self.assertEqual(sts["spec"]["replicas"], 1, "one SQLite writer")
        # --db-max-size under the volume: the coordinator refuses sweeps before the disk fills.
        cap = quantity_bytes(flag_value(bakeoff_invocation(coord)[1], "--db-max-size"))
        self.assertLess(cap, quantity_bytes(claims[mount["name"]]["spec"]["resources"]["requests"]["storage"]))
        worker_args = bakeoff_invocation(worker)[1]
        worker_mounts = {m["mountPath"] for m in worker["volumeMounts"]}
        for flag in ("--work-dir", "--cache-dir"):
            self.assertIn(flag_value(worker_args, flag), worker_mounts, flag)
        # The image (deploy/Dockerfile) sets HOME and the user; the pods match them.
        dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
        home = re.search(r"\bHOME=(\S+)", dockerfile).group(1)
        self.assertIn(home, worker_mounts, "the image's HOME is writable")
        uid = int(re.search(r"^USER (\d+)", dockerfile, re.M).group(1))
        for workload in (sts, ds):
            self.assertEqual(workload["spec"]["template"]["spec"]["securityContext"]["runAsUser"], uid)

    def test_workers_are_named_after_their_node_and_get_one_rank_per_gpu(self):
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        (worker,) = ds["spec"]["template"]["spec"]["containers"]
        args = bakeoff_invocation(worker)[1]
        env = {e["name"]: e for e in worker["env"]}
        name = flag_value(args, "--name")
        var = re.fullmatch(r"\$\((\w+)\)", name).group(1)
        self.assertEqual(env[var]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName")
        gpus = int(worker["resources"]["limits"]["nvidia.com/gpu"])
        devices = flag_value(args, "--cuda-devices").split(",")
        self.assertEqual(devices, [str(i) for i in range(gpus)], "--cuda-devices must list 0..nvidia.com/gpu-1")
        self.assertEqual(flag_value(args, "--slots"), "0", "GPU workers take no CPU trials")
        # The metrics port the coordinator advertises in /api/v1/sd is the declared one.
        port = int(flag_value(args, "--metrics-listen").rsplit(":", 1)[1])
        self.assertIn(port, [p["containerPort"] for p in worker["ports"]])
        self.assertEqual(worker["livenessProbe"]["httpGet"]["path"], "/metrics")

    def named_port(self, container, name_or_number):
        for p in container.get("ports", []):
            if name_or_number in (p.get("name"), p["containerPort"]):
                return p["containerPort"]
        raise AssertionError(f"container {container['name']} has no port {name_or_number}")

    def test_probes_use_the_real_routes_and_ports(self):
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        (coord,) = sts["spec"]["template"]["spec"]["containers"]
        args = bakeoff_invocation(coord)[1]
        http_port = int(flag_value(args, "--listen").rsplit(":", 1)[1])
        worker_port = int(flag_value(args, "--worker-listen").rsplit(":", 1)[1])
        self.assertEqual(coord["readinessProbe"]["httpGet"]["path"], "/healthz")
        # The routes open without a token (docs/cli.md): /healthz, and /metrics unless
        # --metrics-require-token.
        self.assertNotIn("--metrics-require-token", args)
        self.assertEqual(coord["livenessProbe"]["httpGet"]["path"], "/metrics")
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(self.named_port(coord, coord[probe]["httpGet"]["port"]), http_port, probe)
        self.assertEqual(self.named_port(coord, "worker"), worker_port)

    def test_services_route_to_the_coordinator_ports_the_clients_use(self):
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        (coord,) = sts["spec"]["template"]["spec"]["containers"]
        pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        governing = find(self.objects, "Service", sts["spec"]["serviceName"])
        self.assertEqual(governing["spec"]["clusterIP"], "None")

        def service_port(host_port):
            host, port = host_port.rsplit(":", 1)
            svc = find(self.objects, "Service", host.split(".")[0])
            for k, v in svc["spec"]["selector"].items():
                self.assertEqual(pod_labels.get(k), v, f"Service {host} does not select the coordinator")
            p = next((p for p in svc["spec"]["ports"] if p["port"] == int(port)), None)
            self.assertIsNotNone(p, f"Service {host} has no port {port}")
            return self.named_port(coord, p.get("targetPort", p["port"]))

        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        worker_args = bakeoff_invocation(ds["spec"]["template"]["spec"]["containers"][0])[1]
        worker_port = int(flag_value(bakeoff_invocation(coord)[1], "--worker-listen").rsplit(":", 1)[1])
        http_port = int(flag_value(bakeoff_invocation(coord)[1], "--listen").rsplit(":", 1)[1])
        self.assertEqual(service_port(flag_value(worker_args, "--coordinator")), worker_port)
        config = yaml.safe_load(find(self.objects, "ConfigMap", "bakeoff-prometheus")["data"]["prometheus.yml"])
        jobs = {j["job_name"]: j for j in config["scrape_configs"]}
        self.assertEqual(service_port(jobs["bakeoff-coordinator"]["static_configs"][0]["targets"][0]), http_port)
        sd_url = jobs["bakeoff-workers"]["http_sd_configs"][0]["url"]
        m = re.fullmatch(r"http://([^/]+)/api/v1/sd", sd_url)
        self.assertIsNotNone(m, sd_url)
        self.assertEqual(service_port(m.group(1)), http_port)

    # --- Prometheus --------------------------------------------------------------------

    def test_prometheus_reads_its_token_from_the_read_token_secret(self):
        deploy = find(self.objects, "Deployment", "bakeoff-prometheus")
        (prom,) = deploy["spec"]["template"]["spec"]["containers"]
        mounts = self.secret_mounts(deploy, prom)
        config = yaml.safe_load(find(self.objects, "ConfigMap", "bakeoff-prometheus")["data"]["prometheus.yml"])
        files = []
        for job in config["scrape_configs"]:
            files += [job.get("authorization", {}).get("credentials_file")]
            files += [sd.get("authorization", {}).get("credentials_file") for sd in job.get("http_sd_configs", [])]
        files = [f for f in files if f]
        self.assertTrue(files)
        for f in files:
            self.assertEqual(self.secret_of_path(mounts, f), "bakeoff-read-token", f)
        self.assertEqual(set(mounts.values()), {"bakeoff-read-token"})
        # --config.file is the ConfigMap's file where it is mounted.
        config_file = next(a.split("=", 1)[1] for a in prom["args"] if a.startswith("--config.file="))
        volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
        mount = next(m for m in prom["volumeMounts"] if config_file.startswith(m["mountPath"] + "/"))
        self.assertEqual(volumes[mount["name"]]["configMap"]["name"], "bakeoff-prometheus")

    def test_promtool_accepts_the_prometheus_configuration(self):
        if shutil.which("promtool") is None:
            self.skipTest("promtool is not installed (Debian package prometheus; scripts/setup installs it)")
        text = find(self.objects, "ConfigMap", "bakeoff-prometheus")["data"]["prometheus.yml"]
        with tempfile.TemporaryDirectory() as tmp:
            # promtool opens a scrape job's credentials_file: point it at a stand-in.
            token = Path(tmp) / "token"
            token.write_text(SECRET_PLACEHOLDER)
            config = Path(tmp) / "prometheus.yml"
            config.write_text(re.sub(r"credentials_file: \S+", f"credentials_file: {token}", text))
            out = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True,
                                 timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


# Where the image (deploy/Dockerfile) keeps the source tree: its files are this checkout's.
IMAGE_SOURCE_DIR = "/opt/bakeoff/src"
DEADLINE_S = 30


def wait_for(condition, what, deadline_s=DEADLINE_S):
    """Polls `condition` until it returns a true value or the deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")


def http_get(url, token=None):
    """(status, body) of a GET, or (None, reason) when nothing answers."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return None, str(e)


class ManifestArgumentsStartTest(unittest.TestCase):
    """The coordinator and a worker started with the manifests' own arguments, on
    loopback: every value is accepted (not only every flag name), the probes' routes
    answer, the worker registers under its node's name through the worker token, and
    /api/v1/sd lists it for Prometheus with the read token. What only a cluster provides
    is stood in for: each mounted path becomes a directory under a temporary root (the
    Secrets' files with fresh tokens), listen addresses become 127.0.0.1 with port 0,
    the downward API's values become a node name and 127.0.0.1, and the worker runs
    /bin/true as its trainer (no trial runs here)."""

    def setUp(self):
        self.binary = os.environ.get("BAKEOFF_BIN")
        if not self.binary:
            self.skipTest("BAKEOFF_BIN is not set (ctest sets it to the built bakeoff)")
        self.objects = rendered()
        self.tmp = Path(tempfile.mkdtemp(prefix="bakeoff-k8s-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.tokens = {}
        for _, o in self.objects:
            if o["kind"] == "Secret":
                self.tokens[o["metadata"]["name"]] = os.urandom(16).hex()

    def start(self, workload, substitutions, overrides):
        """Starts the workload's bakeoff with its arguments made local; `overrides`
        ({flag: value}) replaces a flag's value or adds the flag."""
        pod = workload["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = {}
        for m in container.get("volumeMounts", []):
            local = self.tmp / workload["metadata"]["name"] / m["mountPath"].lstrip("/")
            local.mkdir(parents=True, exist_ok=True)
            secret = volumes.get(m["name"], {}).get("secret")
            if secret:
                (local / "token").write_text(self.tokens[secret["secretName"]] + "\n")
            mounts[m["mountPath"]] = local

        def local_value(arg):
            for var, value in substitutions.items():
                arg = arg.replace(f"$({var})", value)
            if arg.startswith(IMAGE_SOURCE_DIR + "/"):
                return str(ROOT / arg[len(IMAGE_SOURCE_DIR) + 1:])
            for mount, local in mounts.items():
                if arg.startswith(mount.rstrip("/") + "/"):
                    return str(local / arg[len(mount.rstrip("/")) + 1:])
                if arg == mount:
                    return str(local)
            if re.fullmatch(r"[\w.-]+:\d+", arg):  # a listen address: loopback, a free port
                return "127.0.0.1:0"
            return arg

        subcommand, args = bakeoff_invocation(container)
        args = [local_value(a) for a in args]
        for flag, value in overrides.items():
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
        argv = [self.binary, subcommand] + args
        log = open(self.tmp / f"{subcommand}.log", "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def stop():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            log.close()
        self.addCleanup(stop)
        return process

    def running(self, process, name):
        if process.poll() is not None:
            raise AssertionError(f"bakeoff {name} exited {process.returncode}:\n{self.log(name)}")
        return True

    def log(self, name):
        return (self.tmp / f"{name}.log").read_text()

    def test_the_coordinator_and_a_worker_start_with_the_manifest_arguments(self):
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        ports_file = self.tmp / "ports.json"
        coordinator = self.start(sts, {}, {"--ports-file": str(ports_file)})
        ports = wait_for(lambda: self.running(coordinator, "coordinator") and ports_file.exists()
                         and json.loads(ports_file.read_text()), "the coordinator's ports file")
        base = f"http://127.0.0.1:{ports['http_port']}"
        (coord,) = sts["spec"]["template"]["spec"]["containers"]
        for probe in ("readinessProbe", "livenessProbe"):
            status, body = http_get(base + coord[probe]["httpGet"]["path"])
            self.assertEqual(status, 200, f"{probe}: {body}")

        # The manifest's --coordinator names the Service; here it is the coordinator above.
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        worker = self.start(ds, {"NODE_NAME": "node-a", "POD_IP": "127.0.0.1"},
                            {"--coordinator": f"127.0.0.1:{ports['worker_port']}", "--trainer": "/bin/true"})

        read_token = self.tokens["bakeoff-read-token"]

        def discovered():
            self.running(worker, "worker")
            status, body = http_get(base + "/api/v1/sd", read_token)
            self.assertEqual(status, 200, body)
            groups = json.loads(body)
            return [g for g in groups if g["labels"].get("worker") == "node-a"]

        (group,) = wait_for(discovered, "the worker node-a in /api/v1/sd\n" + self.log("worker"))
        (target,) = group["targets"]
        self.assertEqual(http_get(f"http://{target}/metrics")[0], 200)
        status, body = http_get(base + "/api/v1/workers", read_token)
        (info,) = json.loads(body)
        self.assertEqual((info["id"], info["cuda_devices"], info["cpu_slots"]), ("node-a", [0], 0))
        # The worker credential is not an API token (docs/security.md).
        self.assertEqual(http_get(base + "/api/v1/workers", self.tokens["bakeoff-worker-token"])[0], 401)
        for process, name in ((worker, "worker"), (coordinator, "coordinator")):
            process.send_signal(signal.SIGTERM)
            self.assertEqual(process.wait(timeout=DEADLINE_S), 0, self.log(name))


if __name__ == "__main__":
    unittest.main()
