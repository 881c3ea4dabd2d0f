"""A second engine for the OpenAPI document's schemas: Python's re and the jsonschema package.

Reads one JSON request on standard input, writes one JSON answer on standard output:
  {"patterns": {pattern: [probe, ...]}}
      -> {"patterns": {pattern: {"error": str} | {"matches": [bool, ...]}}}
     each pattern compiled by re (its warnings are errors), each probe matched as jsonschema
     matches a pattern (re.search);
  {"document": {...}, "instances": [{"at": "#/json/pointer", "value": ...}]}
      -> {"errors": [[message, ...], ...]}
     each value validated against the schema at its pointer in the document (draft 2020-12, the
     dialect of OpenAPI 3.1), formats checked.
"""

import datetime
import json
import re
import sys
import warnings

import jsonschema

# jsonschema checks date-time only with a package Debian does not ship: RFC 3339's form, and
# a date and time that exist.
RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)

FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def date_time(value):
    if not isinstance(value, str):
        return True
    if RFC3339.fullmatch(value) is None:
        return False
    day, time = value[:10], value[11:19]
    datetime.date.fromisoformat(day)
    datetime.time.fromisoformat(time)
    return True


def patterns(request):
    answer = {}
    for pattern, probes in request.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                compiled = re.compile(pattern)
        except (re.error, Warning) as err:
            answer[pattern] = {"error": f"{type(err).__name__}: {err}"}
            continue
        answer[pattern] = {"matches": [compiled.search(p) is not None for p in probes]}
    return answer


def validate(document, instances):
    errors = []
    resolver = jsonschema.RefResolver.from_schema(document)
    for item in instances:
        validator = jsonschema.Draft202012Validator({"$ref": item["at"]}, resolver=resolver, format_checker=FORMATS)
        errors.append(
            [f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(item["value"])]
        )
    return errors


def main():
    request = json.load(sys.stdin)
    if "patterns" in request:
        json.dump({"patterns": patterns(request["patterns"])}, sys.stdout)
    else:
        json.dump({"errors": validate(request["document"], request["instances"])}, sys.stdout)


main()
