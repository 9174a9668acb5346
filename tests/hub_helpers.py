"""A Hugging Face Hub on the far side of the real ``huggingface_hub`` client: only its network boundary is replaced
(an ``httpx2.MockTransport`` through ``huggingface_hub.set_client_factory``), with Xet and telemetry off, so every
request the client builds (create the repository, check the card's YAML, ask how each file uploads, the large-file
batch, the PUT of each large file, the commit) is recorded and answered as the Hub answers.

The answers follow the Hub's own policy for a new repository: its default ``.gitattributes`` stores ``*.safetensors``,
``*.gguf``, ``*.parquet`` and ``*.bin`` files in LFS, every other file goes into the commit itself.
"""

import json
import re

LFS = (".safetensors", ".gguf", ".parquet", ".bin")


class MockHub:
    """Records ``(method, path, body)`` of every request in :attr:`calls`; :attr:`commits` holds each commit's
    ndjson lines (parsed)."""

    def __init__(self):
        self.calls: list[tuple[str, str, bytes]] = []
        self.commits: list[list[dict]] = []
        self.created: list[dict] = []

    def handler(self, req):
        import httpx2

        path, body = req.url.path, req.read()
        self.calls.append((req.method, str(req.url), body))
        if path == "/api/repos/create":
            self.created.append(json.loads(body))
            return httpx2.Response(200, json={"url": "https://huggingface.co/x/y"})
        if path == "/api/validate-yaml":
            return httpx2.Response(200, json={"errors": [], "warnings": []})
        if re.fullmatch(r"/api/(models|datasets)/[^/]+/[^/]+/preupload/[^/]+", path):
            files = json.loads(body)["files"]
            modes = [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(LFS) else "regular"} for f in files]
            return httpx2.Response(200, json={"files": [{**m, "shouldIgnore": False} for m in modes]})
        if path.endswith(".git/info/lfs/objects/batch"):
            objs = json.loads(body)["objects"]
            out = [{**o, "actions": {"upload": {"href": f"https://lfs.mock/{o['oid']}"}}} for o in objs]
            return httpx2.Response(200, json={"transfer": "basic", "objects": out})
        if req.method == "PUT" and req.url.host == "lfs.mock":
            return httpx2.Response(200)
        if m := re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)/commit/[^/]+", path):
            self.commits.append([json.loads(line) for line in body.decode().splitlines()])
            url = f"https://huggingface.co/{'' if m[1] == 'models' else 'datasets/'}{m[2]}/commit/c0ffee"
            return httpx2.Response(200, json={"commitUrl": url, "commitOid": "c0ffee"})
        return httpx2.Response(404, json={"error": f"not mocked: {req.method} {path}"})

    def lfs_puts(self) -> list[str]:
        return [url for method, url, _ in self.calls if method == "PUT"]

    def committed(self) -> dict[str, str]:
        """``{path: "file" | "lfsFile"}`` of every file of every commit."""
        return {x["value"]["path"]: x["key"] for c in self.commits for x in c if x["key"] in ("file", "lfsFile")}


def install(monkeypatch, hub: MockHub) -> None:
    """Route the real client through ``hub`` for one test (Xet and telemetry off, as ``HF_HUB_DISABLE_XET=1``)."""
    import httpx2
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    huggingface_hub.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(hub.handler)))


def uninstall() -> None:
    import huggingface_hub
    from huggingface_hub.utils._http import default_client_factory

    huggingface_hub.set_client_factory(default_client_factory)
