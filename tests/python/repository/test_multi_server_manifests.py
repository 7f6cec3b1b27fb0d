"""The Kubernetes manifests of docs/multi-server.md (and its Chinese twin)
hold: each YAML document parses, every pod template and ConfigMap is what
the Kubernetes API's own models accept (the official Python client,
validating types and required fields, as a client-side dry run: no cluster
is needed), nothing is misspelled (a round trip through the models gives
back the same document), and each job starts davincirun with the rank
table it is given."""

import json
import os
import re

import pytest
from conftest import REPO

yaml = pytest.importorskip("yaml")
client = pytest.importorskip("kubernetes.client")

DOCS = [os.path.join(REPO, "docs", "multi-server.md"), os.path.join(REPO, "docs", "zh", "multi-server.md")]
TABLE_DIR = "/user/serverid/devindex/config"


def yaml_blocks(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r"^```yaml\n(.*?)^```", f.read(), re.S | re.M)


def documents():
    return [doc for block in yaml_blocks(DOCS[0]) for doc in yaml.safe_load_all(block)]


def pod_templates(job):
    """The pod templates of a Volcano Job (spec.tasks) or an AscendJob (spec.replicaSpecs)."""
    if job["kind"] == "Job":
        assert job["apiVersion"] == "batch.volcano.sh/v1alpha1"
        return [task["template"] for task in job["spec"]["tasks"]]
    assert job["kind"] == "AscendJob" and job["apiVersion"] == "mindxdl.gitee.com/v1"
    return [spec["template"] for spec in job["spec"]["replicaSpecs"].values()]


def as_model(data, model):
    """`data` read by the client's model `model`, and written back."""
    api = client.ApiClient()
    obj = api.deserialize(json.dumps(data), model, "application/json")
    return api.sanitize_for_serialization(obj)


def test_both_languages_show_the_same_manifests():
    assert yaml_blocks(DOCS[0]) == yaml_blocks(DOCS[1])
    assert [d["kind"] for d in documents()] == ["ConfigMap", "Job", "ConfigMap", "AscendJob"]


@pytest.mark.parametrize("index", range(4))
def test_each_manifest_is_valid_for_the_kubernetes_api(index):
    doc = documents()[index]
    if doc["kind"] == "ConfigMap":
        assert as_model(doc, "V1ConfigMap") == doc
        assert json.loads(doc["data"]["hccl.json"]) == {"status": "initializing"}  # hccl-controller fills it in
        return
    configmaps = {d["metadata"]["name"] for d in documents() if d["kind"] == "ConfigMap"}
    templates = pod_templates(doc)
    assert templates
    for template in templates:
        assert as_model(template, "V1PodTemplateSpec") == template
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        for container in template["spec"]["containers"]:
            assert container["command"][0] == "davincirun"
            env = {e["name"]: e for e in container["env"]}
            assert env["RANK_TABLE_FILE"]["value"] == TABLE_DIR
            assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            # The table's ConfigMap is mounted where RANK_TABLE_FILE points.
            mount = [m for m in container["volumeMounts"] if m["mountPath"] == TABLE_DIR]
            assert len(mount) == 1
            assert volumes[mount[0]["name"]]["configMap"]["name"] in configmaps
