"""Checks of deploy/kubernetes/ without a cluster (docs/kubernetes.md, "What CI checks").

KubernetesManifests*: what `kubectl apply -k` would send, as it is and with the tls
component, is valid against the Kubernetes API schemas; every `bakeoff` flag it passes
exists in the real binary; the Prometheus configuration passes promtool; and the rules
docs/kubernetes.md promises hold (tokens and keys only from Secret files, non-root,
read-only root, probes on the real routes, names and ports that match across objects).
ctest: kubernetes_manifests_test (labels fast, deploy).

ManifestArgumentsStart*: the coordinator and a worker started on loopback with the
manifests' own arguments, plain and with TLS. ctest: kubernetes_manifests_start_slow_test
(labels slow, deploy).

Both run in the project's Python environment, which holds the pinned
kubernetes-validate (deploy/requirements-ci.txt; its schemas ship inside the package, so
nothing is fetched). BAKEOFF_BIN names the built `bakeoff`.
"""

import base64
import copy
import json
import os
import re
import shutil
import signal
import ssl
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


def kustomization(base=K8S):
    return load_documents(base / "kustomization.yaml")[0]


def generated_object(kind, gen, base):
    """A Secret or ConfigMap as a generator makes it (without the hash suffix, which
    kustomize also adds to every reference). Files that are not in git (tokens,
    certificates) get a placeholder."""
    obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}, "data": {}}
    if kind == "Secret":
        obj["type"] = gen.get("type", "Opaque")
    for entry in gen.get("files", []):
        name, _, path = entry.partition("=")
        path = base / (path or name)
        content = path.read_text() if path.exists() else SECRET_PLACEHOLDER
        key = Path(name).name
        obj["data"][key] = base64.b64encode(content.encode()).decode() if kind == "Secret" else content
    return obj


def apply_json_patch(obj, operations, where):
    """RFC 6902 add, replace and remove, the operations the components use."""
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] == "add" and isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace" and not (isinstance(parent, list) or last in parent):
                raise AssertionError(f"{where}: replace of a missing {op['path']}")
            parent[int(last) if isinstance(parent, list) else last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise AssertionError(f"{where}: the test renders only add, replace and remove patches")


def rendered(components=(), base=K8S):
    """Every object `kubectl apply -k` applies, each with the file it came from: the
    resources' documents and the generated objects, then each component in
    `components` (folders below `base`, as `components:` in kustomization.yaml would
    list them) with its generators (behavior create or replace) and JSON patches."""
    kust = kustomization(base)
    objects = []
    for resource in kust["resources"]:
        for doc in load_documents(base / resource):
            objects.append((resource, doc))
    layers = [(base, kust, "kustomization.yaml")]
    for component in list(kust.get("components", [])) + list(components):
        layers.append((base / component, kustomization(base / component), f"{component}/kustomization.yaml"))
    for folder, layer, source in layers:
        for kind, key in (("Secret", "secretGenerator"), ("ConfigMap", "configMapGenerator")):
            for gen in layer.get(key, []):
                obj = generated_object(kind, gen, folder)
                same = [i for i, (_, o) in enumerate(objects)
                        if o["kind"] == kind and o["metadata"]["name"] == gen["name"]]
                behavior = gen.get("behavior", "create")
                if behavior == "replace" and same:
                    objects[same[0]] = (source, obj)
                elif behavior == "create" and not same:
                    objects.append((source, obj))
                else:
                    raise AssertionError(f"{source}: {key} {gen['name']}: behavior {behavior} "
                                         f"with {len(same)} existing")
        for patch in layer.get("patches", []):
            target = patch["target"]
            operations = yaml.safe_load(patch["patch"])
            if not isinstance(operations, list):
                raise AssertionError(f"{source}: the test renders only JSON patches (a list of operations)")
            matched = [o for _, o in objects
                       if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]]
            if len(matched) != 1:
                raise AssertionError(f"{source}: patch target {target} matches {len(matched)} objects")
            apply_json_patch(matched[0], operations, source)
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


# The files each bakeoff subcommand reads from a Secret, by flag; the token flags are
# required, the TLS ones come with the tls component.
FILE_FLAG_SECRETS = {
    "coordinator": {"--token-file": "bakeoff-submit-token", "--read-token-file": "bakeoff-read-token",
                    "--worker-token-file": "bakeoff-worker-token", "--tls-cert": "bakeoff-coordinator-tls",
                    "--tls-key": "bakeoff-coordinator-tls"},
    "worker": {"--token-file": "bakeoff-worker-token"},
}
TOKEN_FLAGS = {"--token-file", "--read-token-file", "--worker-token-file"}


def without_tls(config):
    """A Prometheus configuration with its TLS settings taken out."""
    config = copy.deepcopy(config)
    for job in config["scrape_configs"]:
        for holder in [job] + job.get("http_sd_configs", []):
            holder.pop("tls_config", None)
            holder.pop("scheme", None)
            if "url" in holder:
                holder["url"] = holder["url"].replace("https://", "http://", 1)
    return config


class KubernetesManifestsTest(unittest.TestCase):
    """deploy/kubernetes as kustomization.yaml has it (plain HTTP between the pods)."""

    components = ()

    def setUp(self):
        self.objects = rendered(self.components)

    def tls(self):
        return "--tls-cert" in bakeoff_invocation(self.coordinator_container())[1]

    def coordinator_container(self):
        (c,) = find(self.objects, "StatefulSet", "bakeoff-coordinator")["spec"]["template"]["spec"]["containers"]
        return c

    def prometheus_config(self):
        return yaml.safe_load(find(self.objects, "ConfigMap", "bakeoff-prometheus")["data"]["prometheus.yml"])

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
        components = {p.parent.name for p in K8S.glob("*/kustomization.yaml")}
        self.assertEqual(components, {"tls"})
        for folder in [K8S] + [K8S / c for c in components]:
            layer = kustomization(folder)
            if folder != K8S:
                self.assertEqual(layer["kind"], "Component", folder)
            for key in ("secretGenerator", "configMapGenerator"):
                for gen in layer.get(key, []):
                    for entry in gen["files"]:
                        path = folder / entry.split("=", 1)[-1]
                        if path.is_file() and "/.gitignore" not in str(path):
                            continue
                        # Tokens, keys and certificates are made by the operator and
                        # never committed: their folder ignores everything.
                        ignored = path.parent / ".gitignore"
                        self.assertTrue(ignored.is_file() and "*" in ignored.read_text().split(),
                                        f"{folder.name}/kustomization.yaml: {entry} is neither in git nor ignored")
                        self.assertEqual(key, "secretGenerator" if path.name != "ca.pem" else "configMapGenerator",
                                         entry)

    def test_prometheus_configurations_differ_only_in_tls(self):
        plain = yaml.safe_load((K8S / "prometheus" / "prometheus.yml").read_text())
        tls = yaml.safe_load((K8S / "tls" / "prometheus-tls.yml").read_text())
        self.assertNotEqual(plain, tls)
        self.assertEqual(without_tls(tls), plain)

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

    def test_tokens_and_keys_come_only_from_secret_files(self):
        generated = {o["metadata"]["name"] for _, o in self.objects if o["kind"] == "Secret"}
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
                read = set()
                for flag, secret in FILE_FLAG_SECRETS[subcommand].items():
                    path = flag_value(args, flag)
                    if path is None:
                        self.assertNotIn(flag, TOKEN_FLAGS, f"{where}: bakeoff {subcommand} without {flag}")
                        continue
                    self.assertEqual(self.secret_of_path(mounts, path), secret,
                                     f"{where}: {flag} {path} is not a file of the Secret {secret}")
                    read.add(secret)
                # Least privilege: a pod holds only the secrets its flags read.
                self.assertEqual(set(mounts.values()), read, where)

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
            # With --tls-cert the HTTP listener speaks only HTTPS.
            self.assertEqual(coord[probe]["httpGet"].get("scheme", "HTTP"), "HTTPS" if self.tls() else "HTTP", probe)
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
        scheme = "https" if self.tls() else "http"
        m = re.fullmatch(scheme + r"://([^/]+)/api/v1/sd", sd_url)
        self.assertIsNotNone(m, sd_url)
        self.assertEqual(service_port(m.group(1)), http_port)
        self.assertEqual(jobs["bakeoff-coordinator"].get("scheme", "http"), scheme)
        # Workers speak TLS exactly when the coordinator does, and trust its CA.
        self.assertEqual(flag_value(worker_args, "--tls-ca") is not None, self.tls())

    def test_network_policies_admit_exactly_the_peers_each_port_needs(self):
        # Security review, hole 13: rank 0's store and NCCL take worker pods only; the
        # coordinator's worker port takes workers only; Prometheus reaches /metrics.
        policies = {o["metadata"]["name"]: o for _, o in self.objects if o["kind"] == "NetworkPolicy"}
        self.assertEqual(set(policies), {"bakeoff-worker", "bakeoff-coordinator"})
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        prom = next(o for _, o in workloads(self.objects) if o["metadata"]["name"] == "bakeoff-prometheus")
        labels = {name: w["spec"]["template"]["metadata"]["labels"]
                  for name, w in (("worker", ds), ("coordinator", sts), ("prometheus", prom))}

        def selects(selector, pod):
            return all(labels[pod].get(k) == v for k, v in selector["matchLabels"].items())

        def admitted(policy, source, port):
            for rule in policy["spec"]["ingress"]:
                peers = rule.get("from")
                ports = [p["port"] for p in rule.get("ports", [])]
                if (peers is None or any(selects(p["podSelector"], source) for p in peers)) and \
                        (not ports or port in ports):
                    return True
            return False

        worker, coordinator = policies["bakeoff-worker"], policies["bakeoff-coordinator"]
        self.assertTrue(selects(worker["spec"]["podSelector"], "worker"))
        self.assertFalse(selects(worker["spec"]["podSelector"], "coordinator"))
        self.assertTrue(selects(coordinator["spec"]["podSelector"], "coordinator"))
        worker_args = bakeoff_invocation(ds["spec"]["template"]["spec"]["containers"][0])[1]
        metrics_port = int(flag_value(worker_args, "--metrics-listen").rsplit(":", 1)[1])
        for store_port in (29500, 29999):
            self.assertTrue(admitted(worker, "worker", store_port))
            self.assertFalse(admitted(worker, "coordinator", store_port), "the coordinator never reaches a store")
            self.assertFalse(admitted(worker, "prometheus", store_port))
        self.assertTrue(admitted(worker, "prometheus", metrics_port))
        coord_args = bakeoff_invocation(sts["spec"]["template"]["spec"]["containers"][0])[1]
        worker_port = int(flag_value(coord_args, "--worker-listen").rsplit(":", 1)[1])
        http_port = int(flag_value(coord_args, "--listen").rsplit(":", 1)[1])
        self.assertTrue(admitted(coordinator, "worker", worker_port))
        self.assertFalse(admitted(coordinator, "prometheus", worker_port))
        self.assertTrue(admitted(coordinator, "prometheus", http_port))

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
        # With TLS, the CA file is the coordinator's CA (ConfigMap bakeoff-ca), mounted.
        ca_files = [h["tls_config"]["ca_file"] for job in config["scrape_configs"]
                    for h in [job] + job.get("http_sd_configs", []) if "tls_config" in h]
        self.assertEqual(len(ca_files), 2 if self.tls() else 0)
        for f in ca_files:
            self.assertEqual(self.config_map_of_path(deploy, prom, f), "bakeoff-ca", f)
        # --config.file is the ConfigMap's file where it is mounted.
        config_file = next(a.split("=", 1)[1] for a in prom["args"] if a.startswith("--config.file="))
        volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
        mount = next(m for m in prom["volumeMounts"] if config_file.startswith(m["mountPath"] + "/"))
        self.assertEqual(volumes[mount["name"]]["configMap"]["name"], "bakeoff-prometheus")

    def config_map_of_path(self, workload, container, path):
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        for m in container.get("volumeMounts", []):
            if path.startswith(m["mountPath"].rstrip("/") + "/") and "configMap" in volumes.get(m["name"], {}):
                return volumes[m["name"]]["configMap"]["name"]
        return None

    def test_workers_trust_the_coordinators_ca_when_it_serves_tls(self):
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        (worker,) = ds["spec"]["template"]["spec"]["containers"]
        ca = flag_value(bakeoff_invocation(worker)[1], "--tls-ca")
        self.assertEqual(ca is not None, self.tls())
        if ca is not None:
            self.assertEqual(self.config_map_of_path(ds, worker, ca), "bakeoff-ca", ca)

    def test_promtool_accepts_the_prometheus_configuration(self):
        if shutil.which("promtool") is None:
            self.skipTest("promtool is not installed (Debian package prometheus; scripts/setup installs it)")
        text = find(self.objects, "ConfigMap", "bakeoff-prometheus")["data"]["prometheus.yml"]
        with tempfile.TemporaryDirectory() as tmp:
            # promtool opens a scrape job's credentials and CA files: point them at stand-ins.
            token = Path(tmp) / "token"
            token.write_text(SECRET_PLACEHOLDER)
            config = Path(tmp) / "prometheus.yml"
            config.write_text(re.sub(r"(credentials_file|ca_file): \S+", f"\\1: {token}", text))
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


def http_get(url, token=None, ca_file=None):
    """(status, body) of a GET, or (None, reason) when nothing answers. An https URL is
    verified against `ca_file`, host name included."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return None, str(e)


def make_certificates(folder):
    """A CA and a server certificate signed by it (openssl, as docs/kubernetes.md makes
    them), naming the Services and 127.0.0.1. Returns {file name: PEM text}."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=Bakeoff test CA")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=bakeoff-coordinator")
    (folder / "server.ext").write_text(
        "subjectAltName=DNS:bakeoff-coordinator,DNS:bakeoff-coordinator-workers,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    return {name: (folder / name).read_text() for name in ("ca.pem", "server.pem", "server.key")}


class KubernetesManifestsWithTlsTest(KubernetesManifestsTest):
    """deploy/kubernetes with the tls component (`components: [tls]`): every check
    above, on the patched objects and the replaced Prometheus configuration."""

    components = ("tls",)

    def test_the_tls_component_turns_tls_on(self):
        self.assertTrue(self.tls())


class ManifestArgumentsStartTest(unittest.TestCase):
    """The coordinator and a worker started with the manifests' own arguments, on
    loopback: every value is accepted (not only every flag name), the probes' routes
    answer, the worker registers under its node's name through the worker token, and
    /api/v1/sd lists it for Prometheus with the read token. What only a cluster provides
    is stood in for: each mounted path becomes a directory under a temporary root (the
    Secrets' files with fresh tokens), listen addresses become 127.0.0.1 with port 0,
    the downward API's values become a node name and 127.0.0.1, and the worker runs
    /bin/true as its trainer (no trial runs here)."""

    components = ()

    def setUp(self):
        self.binary = os.environ.get("BAKEOFF_BIN")
        if not self.binary:
            self.skipTest("BAKEOFF_BIN is not set (ctest sets it to the built bakeoff)")
        self.objects = rendered(self.components)
        self.tmp = Path(tempfile.mkdtemp(prefix="bakeoff-k8s-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # The files of each Secret and ConfigMap a bakeoff pod mounts: fresh tokens, and
        # with TLS a certificate and its CA.
        self.files = {}
        self.tokens = {}
        for _, o in self.objects:
            if o["kind"] == "Secret" and list(o["data"]) == ["token"]:
                self.tokens[o["metadata"]["name"]] = os.urandom(16).hex()
                self.files[("Secret", o["metadata"]["name"])] = {"token": self.tokens[o["metadata"]["name"]] + "\n"}
        self.ca_file = None
        if "tls" in self.components:
            if shutil.which("openssl") is None:
                self.skipTest("openssl is not installed (scripts/setup installs it)")
            pem = make_certificates(self.tmp / "pki")
            self.files[("Secret", "bakeoff-coordinator-tls")] = {k: pem[k] for k in ("server.pem", "server.key")}
            self.files[("ConfigMap", "bakeoff-ca")] = {"ca.pem": pem["ca.pem"]}
            self.ca_file = str(self.tmp / "pki" / "ca.pem")

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
            volume = volumes.get(m["name"], {})
            source = (("Secret", volume["secret"]["secretName"]) if "secret" in volume else
                      ("ConfigMap", volume["configMap"]["name"]) if "configMap" in volume else None)
            for name, content in self.files.get(source, {}).items():
                (local / name).write_text(content)
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

    def start_coordinator(self):
        """The coordinator of the StatefulSet's arguments, on ports it writes to a file;
        returns (its StatefulSet, the process, its ports)."""
        sts = find(self.objects, "StatefulSet", "bakeoff-coordinator")
        ports_file = self.tmp / "ports.json"
        coordinator = self.start(sts, {}, {"--ports-file": str(ports_file)})
        ports = wait_for(lambda: self.running(coordinator, "coordinator") and ports_file.exists()
                         and json.loads(ports_file.read_text()), "the coordinator's ports file")
        return sts, coordinator, ports

    def test_the_coordinator_and_a_worker_start_with_the_manifest_arguments(self):
        sts, coordinator, ports = self.start_coordinator()
        (coord,) = sts["spec"]["template"]["spec"]["containers"]
        scheme = coord["readinessProbe"]["httpGet"].get("scheme", "HTTP").lower()
        self.assertEqual(scheme == "https", "tls" in self.components)
        base = f"{scheme}://127.0.0.1:{ports['http_port']}"
        for probe in ("readinessProbe", "livenessProbe"):
            status, body = http_get(base + coord[probe]["httpGet"]["path"], ca_file=self.ca_file)
            self.assertEqual(status, 200, f"{probe}: {body}")

        # The manifest's --coordinator names the Service; here it is the coordinator above.
        ds = find(self.objects, "DaemonSet", "bakeoff-worker")
        worker = self.start(ds, {"NODE_NAME": "node-a", "POD_IP": "127.0.0.1"},
                            {"--coordinator": f"127.0.0.1:{ports['worker_port']}", "--trainer": "/bin/true"})

        read_token = self.tokens["bakeoff-read-token"]

        def discovered():
            self.running(worker, "worker")
            status, body = http_get(base + "/api/v1/sd", read_token, self.ca_file)
            self.assertEqual(status, 200, body)
            groups = json.loads(body)
            return [g for g in groups if g["labels"].get("worker") == "node-a"]

        (group,) = wait_for(discovered, "the worker node-a in /api/v1/sd\n" + self.log("worker"))
        (target,) = group["targets"]
        self.assertEqual(http_get(f"http://{target}/metrics")[0], 200)
        status, body = http_get(base + "/api/v1/workers", read_token, self.ca_file)
        (info,) = json.loads(body)
        self.assertEqual((info["id"], info["cuda_devices"], info["cpu_slots"]), ("node-a", [0], 0))
        # The worker credential is not an API token (docs/security.md).
        self.assertEqual(http_get(base + "/api/v1/workers", self.tokens["bakeoff-worker-token"], self.ca_file)[0], 401)
        for process, name in ((worker, "worker"), (coordinator, "coordinator")):
            process.send_signal(signal.SIGTERM)
            self.assertEqual(process.wait(timeout=DEADLINE_S), 0, self.log(name))


class ManifestArgumentsStartWithTlsTest(ManifestArgumentsStartTest):
    """The same with the tls component: the coordinator serves HTTPS and TLS to workers
    with a certificate from its Secret, the worker verifies it against the CA from its
    ConfigMap, and the API answers only to clients that verify it too."""

    components = ("tls",)

    def test_a_plain_http_client_gets_no_answer(self):
        _, _, ports = self.start_coordinator()
        self.assertNotEqual(http_get(f"http://127.0.0.1:{ports['http_port']}/healthz")[0], 200)
        self.assertEqual(http_get(f"https://127.0.0.1:{ports['http_port']}/healthz", ca_file=self.ca_file)[0], 200)


if __name__ == "__main__":
    unittest.main()
