"""py-csv as a component: the WIT glue around `summaries` (componentize-py).

componentize-py instantiates `Tool` for the exported `tool` interface of
`wit/tool.wit` (world `tool-plugin`); `wit_world` is generated at build time.
"""

import json

import wit_world
from wit_world.exports import tool as wit
from componentize_py_types import Err

import summaries

ANNOTATIONS = wit.Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)

CODES = {
    "invalid-arguments": wit.ErrorCode.INVALID_ARGUMENTS,
    "unknown-tool": wit.ErrorCode.UNKNOWN_TOOL,
    "not-found": wit.ErrorCode.NOT_FOUND,
    "permission-denied": wit.ErrorCode.PERMISSION_DENIED,
    "too-large": wit.ErrorCode.TOO_LARGE,
    "io": wit.ErrorCode.IO,
    "internal": wit.ErrorCode.INTERNAL,
}


def descriptor(spec):
    return wit.ToolDescriptor(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=json.dumps(spec.input_schema),
        output_schema=json.dumps(spec.output_schema),
        annotations=ANNOTATIONS,
    )


class Tool(wit_world.exports.Tool):
    def list_tools(self):
        return [descriptor(spec) for spec in summaries.TOOLS]

    def call(self, name, args_json):
        try:
            return json.dumps(summaries.call(name, json.loads(args_json)))
        except summaries.ToolFailure as f:
            raise Err(wit.ToolError(code=CODES[f.code], message=f.message))
        except MemoryError:
            raise
        except Exception as e:  # a bug: say which, rather than trap
            raise Err(wit.ToolError(code=wit.ErrorCode.INTERNAL, message=f"{type(e).__name__}: {e}"))
