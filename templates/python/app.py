"""{{name}}: a wasm-mcp tool plugin in Python (componentize-py).

componentize-py instantiates `Tool` for the exported `tool` interface of
wit/tool.wit; `wit_world` is generated at build time. Inside the component
the task's worktree is the only filesystem, mounted at `/`.
"""

import json

import wit_world
from wit_world.exports import tool as wit
from componentize_py_types import Err

# The tool is named after the project, so two scaffolded plugins never clash.
TOOL_NAME = "{{name}}"

READ_ONLY = wit.Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)

LINE_COUNT_INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "File, relative to the worktree root."}},
    "required": ["path"],
    "additionalProperties": False,
}
LINE_COUNT_OUTPUT = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "lines": {"type": "integer", "minimum": 0}},
    "required": ["path", "lines"],
    "additionalProperties": False,
}


def fail(code, message):
    return Err(wit.ToolError(code=code, message=message))


def line_count(args):
    path = args["path"]
    try:
        with open("/" + path.lstrip("/"), "rb") as f:
            return {"path": path, "lines": f.read().count(b"\n")}
    except FileNotFoundError:
        raise fail(wit.ErrorCode.NOT_FOUND, f"{path}: no such file in the worktree")
    except IsADirectoryError:
        raise fail(wit.ErrorCode.INVALID_ARGUMENTS, f"{path}: is a directory")
    except PermissionError:
        raise fail(wit.ErrorCode.PERMISSION_DENIED, f"{path}: refused by the sandbox")
    except OSError as e:
        raise fail(wit.ErrorCode.IO, f"{path}: {e}")


class Tool(wit_world.exports.Tool):
    def list_tools(self):
        return [
            wit.ToolDescriptor(
                name=TOOL_NAME,
                title="Count lines",
                description="Counts the lines of a file in the worktree.",
                input_schema=json.dumps(LINE_COUNT_INPUT),
                output_schema=json.dumps(LINE_COUNT_OUTPUT),
                annotations=READ_ONLY,
            )
        ]

    def call(self, name, args_json):
        if name != TOOL_NAME:
            raise fail(wit.ErrorCode.UNKNOWN_TOOL, f"unknown tool `{name}`")
        # The host has validated the arguments against LINE_COUNT_INPUT.
        try:
            return json.dumps(line_count(json.loads(args_json)))
        except Err:
            raise
        except Exception as e:  # any other exception would trap the call
            raise fail(wit.ErrorCode.INTERNAL, f"{type(e).__name__}: {e}")
