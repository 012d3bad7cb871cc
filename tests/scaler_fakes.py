"""A small SageMaker JSON-protocol server for the scaler's client tests (stdlib only: it runs on Python 3.8 too).

Also an IMDSv2 stand-in (:class:`FakeImds`) serving role credentials.

Why a fake and not moto: moto has no BatchAddClusterNodes or BatchDeleteClusterNodes, and the runtime's tests run
on Python 3.8 without moto. It records each request (operation, body, headers) and answers from a queue of
scripted replies per operation, else from a simple cluster model (counts per group, nodes).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class FakeSageMaker:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.scripted: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.groups: dict[str, list[int]] = {}
        self.nodes: list[dict[str, Any]] = []
        self.tags: dict[str, str] = {}
        self.tokens: dict[str, dict[str, Any]] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode() or "{}")
                operation = str(self.headers.get("X-Amz-Target", "")).split(".", 1)[-1]
                fake.requests.append((operation, body, dict(self.headers.items())))
                status, reply = fake.answer(operation, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, operation: str, status: int, reply: dict[str, Any]) -> None:
        self.scripted.setdefault(operation, []).append((status, reply))

    def calls(self, operation: str) -> list[dict[str, Any]]:
        return [body for op, body, _ in self.requests if op == operation]

    def answer(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        queue = self.scripted.get(operation)
        if queue:
            return queue.pop(0)
        if operation == "DescribeCluster":
            groups = [
                {"InstanceGroupName": n, "CurrentCount": c, "TargetCount": t, "Status": "InService"}
                for n, (c, t) in sorted(self.groups.items())
            ]
            arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl"
            return 200, {"ClusterArn": arn, "ClusterName": body["ClusterName"], "InstanceGroups": groups}
        if operation == "ListClusterNodes":
            start = int(body.get("NextToken") or 0)
            page = self.nodes[start : start + int(body.get("MaxResults") or 100)]
            reply: dict[str, Any] = {"ClusterNodeSummaries": page}
            if start + len(page) < len(self.nodes):
                reply["NextToken"] = str(start + len(page))
            return 200, reply
        if operation == "BatchAddClusterNodes":
            token = str(body.get("ClientToken"))
            if token not in self.tokens:
                for item in body["NodesToAdd"]:
                    self.groups[item["InstanceGroupName"]][1] += item["IncrementTargetCountBy"]
                self.tokens[token] = {"Successful": [], "Failed": []}
            return 200, self.tokens[token]
        if operation == "BatchDeleteClusterNodes":
            ids = list(body["NodeIds"])
            known = {n["InstanceId"]: n for n in self.nodes}
            ok = [i for i in ids if i in known]
            for i in ok:
                group = known[i]["InstanceGroupName"]
                self.groups[group][0] -= 1
                self.groups[group][1] -= 1
                self.nodes.remove(known[i])
            failed = [{"NodeId": i, "Code": "NodeIdNotFound", "Message": "no such node"} for i in ids if i not in known]
            return 200, {"Successful": ok, "Failed": failed}
        if operation == "AddTags":
            self.tags.update({t["Key"]: t["Value"] for t in body["Tags"]})
            return 200, {"Tags": body["Tags"]}
        return 400, {"__type": "UnknownOperationException", "message": operation}


class FakeImds:
    """An IMDSv2 stand-in: token, role name, role credentials (counting credential fetches)."""

    def __init__(self, expiration: str) -> None:
        self.fetches = 0
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                self._send(200, "token-1")

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != "token-1":
                    return self._send(401, "")
                if self.path.endswith("/security-credentials/"):
                    return self._send(200, "node-role\n")
                imds.fetches += 1
                self._send(200, json.dumps({"AccessKeyId": "ASIA1", "SecretAccessKey": "s", "Token": "t",
                                            "Expiration": expiration}))  # fmt: skip

            def _send(self, status: int, text: str) -> None:
                self.send_response(status)
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
