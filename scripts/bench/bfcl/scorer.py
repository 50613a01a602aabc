"""BFCL's possible-answer AST checker for Python (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``,
v4), reimplemented: the same rules in the same order, so that a verdict here is BFCL's verdict.

A model output is a list of calls, each ``{function_name: {param: value}}`` (the decoded
``tool_calls``: arguments parsed as JSON). A possible answer is BFCL's ground truth: per call
``{function_name: {param: [acceptable values]}}``, where ``""`` among the values marks the parameter
optional. Rules, per call (``simple_function_checker``):

* the function's name must be in the output; every ``required`` parameter present; no parameter that
  the function does not declare or the answer does not list;
* types as BFCL reads them (``PYTHON_TYPE_MAPPING``: ``type(value) is`` the mapped type, so
  ``True`` is not an integer; an int is accepted for ``float``; list elements checked one level
  deep); a value of the answer's own type where the doc says otherwise is a "variable" and compared
  as is;
* strings compared after ``standardize_string`` (no spaces or ``,./-_*^``, lower case, ``'`` -> ``"``),
  lists element-wise the same, dicts key by key, lists of dicts in order;
* an answer parameter without ``""`` must be present.

Categories: ``simple`` needs exactly one call; ``multiple`` one call, checked against the expected
function; ``parallel`` as many calls as answers, matched in any order (each answer takes the first
unmatched call that passes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str,
}
NESTED_TYPES = ("array", "tuple")


@dataclass
class Verdict:
    valid: bool
    error_type: str = ""
    errors: list[Any] = field(default_factory=list)
    is_variable: bool = False


def ok(is_variable: bool = False) -> Verdict:
    return Verdict(True, is_variable=is_variable)


def check(category: str, functions: list[dict[str, Any]], output: list[dict[str, Any]],
          possible_answer: list[dict[str, Any]]) -> Verdict:
    """BFCL's ``ast_checker`` for a Python category (``simple_python``, ``multiple``, ``parallel``...)."""
    if not isinstance(output, list) or not all(isinstance(call, dict) for call in output):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", ["not a list of calls"])
    if "parallel" in category:
        return parallel_no_order(functions, output, possible_answer)
    if "multiple" in category:
        return multiple(functions, output, possible_answer)
    if len(output) != 1:
        return Verdict(False, "simple_function_checker:wrong_count", ["Wrong number of functions."])
    return simple(functions[0], output[0], possible_answer[0])


def find_description(functions: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((f for f in functions if f["name"] == name), None)


def possible_answer_type(possible: list[Any]) -> type | None:
    for answer in possible:
        if answer != "":   # "" marks an optional parameter
            return type(answer)
    return None


def type_check(param: str, value: Any, possible: list[Any], expected: type, nested: type | None) -> Verdict:
    answer_type = possible_answer_type(possible)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return ok(is_variable)
        for item in possible:
            fits = True   # each element must fit at least one answer's element type
            if type(item) is list:
                for element in value:
                    if not type_check(param, element, item, nested, None).valid:
                        fits = False
                        break
            if fits:
                return ok(is_variable)
        # BFCL falls through with its result already invalid: a "variable" does not rescue it
        failed = Verdict(False, "type_error:nested",
                         [f"Nested type checking failed for parameter {param!r}. Value: {value!r}."])
        if answer_type is not None and type(value) is answer_type:
            failed.is_variable = True
            return failed
    else:
        failed = Verdict(False, "type_error:simple")
        if answer_type is not None and type(value) is answer_type:
            return ok(True)
    failed.error_type = "type_error:simple"
    failed.errors.append(f"Incorrect type for parameter {param!r}. Expected {expected.__name__}, "
                         f"got {type(value).__name__}. Parameter value: {value!r}.")
    return failed


def standardize(text: str) -> str:
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _standardized(values: list[Any]) -> list[Any]:
    return [standardize(v) if type(v) is str else v for v in values]


def string_check(param: str, value: str, possible: list[Any]) -> Verdict:
    if standardize(value) not in [standardize(v) for v in possible if type(v) is str]:
        return Verdict(False, "value_error:string",
                       [f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}."])
    return ok()


def list_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    # BFCL walks each answer with len(): the optional marker "" becomes [], so [] matches it
    answers = [_standardized(list(p) if isinstance(p, (list, str)) else [p]) for p in possible]
    if _standardized(list(value)) not in answers:
        return Verdict(False, "value_error:list/tuple",
                       [f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}."])
    return ok()


def dict_check(param: str, value: dict[str, Any], possible: list[Any]) -> Verdict:
    result = Verdict(False, "dict_checker:unclear")
    for answer in possible:
        if answer == "":
            continue
        result = Verdict(False, "dict_checker:unclear")
        fits = True
        for key, item in value.items():
            if key not in answer:
                result = Verdict(False, "value_error:dict_key", [f"Unexpected dict key parameter: {key!r}."])
                fits = False
                break
            item = standardize(item) if type(item) is str else item
            if item not in _standardized(answer[key]):
                result = Verdict(False, "value_error:dict_value", [f"Invalid value for parameter {key!r}: {item!r}."])
                fits = False
                break
        for key, values in answer.items():
            if key not in value and "" not in values:
                result = Verdict(False, "value_error:dict_key", [f"Missing dict key parameter: {key!r}."])
                fits = False
                break
        if fits:
            return ok()
    return result


def list_dict_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    result = Verdict(False, "list_dict_checker:unclear")
    for answer in possible:
        if len(value) != len(answer):
            result = Verdict(False, "value_error:list_dict_count", ["Wrong number of dictionaries in the list."])
            continue
        fits = True
        for index, item in enumerate(value):
            result = dict_check(param, item, [answer[index]])
            if not result.valid:
                fits = False
                break
        if fits:
            return ok()
    return result


def simple(function: dict[str, Any] | None, output: dict[str, Any], possible_answer: dict[str, Any]) -> Verdict:
    """``simple_function_checker`` (Python): one call against one function and its answer."""
    if function is None:
        return Verdict(False, "simple_function_checker:wrong_func_name", ["expected function not among the docs"])
    possible = next(iter(possible_answer.values()))
    name = function["name"]
    details = function["parameters"]["properties"]
    if name not in output:
        return Verdict(False, "simple_function_checker:wrong_func_name",
                       [f"Function name {name!r} not found in model output."])
    params = output[name]
    if not isinstance(params, dict):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", [f"arguments are not an object: {params!r}"])
    for param in function["parameters"].get("required", []):
        if param not in params:
            return Verdict(False, "simple_function_checker:missing_required",
                           [f"Missing required parameter: {param!r}."])
    for param, value in params.items():
        if param not in details or param not in possible:
            return Verdict(False, "simple_function_checker:unexpected_param", [f"Unexpected parameter: {param!r}."])
        described = details[param]["type"]
        expected = PYTHON_TYPE_MAPPING[described]
        nested = PYTHON_TYPE_MAPPING[details[param]["items"]["type"]] if described in NESTED_TYPES else None
        if described == "float" and type(value) is int:
            value = float(value)
        typed = type_check(param, value, possible[param], expected, nested)
        if not typed.valid:
            return typed
        if not typed.is_variable:
            if expected is dict:
                result = dict_check(param, value, possible[param])
            elif expected is list and nested is dict:
                result = list_dict_check(param, value, possible[param])
            elif expected is str:
                result = string_check(param, value, possible[param])
            elif expected is list:
                result = list_check(param, value, possible[param])
            else:
                result = None
            if result is not None:
                if not result.valid:
                    return result
                continue
        if value not in possible[param]:
            return Verdict(False, "value_error:others",
                           [f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible[param]}."])
    for param, values in possible.items():
        if param not in params and "" not in values:
            return Verdict(False, "simple_function_checker:missing_optional",
                           [f"Optional parameter {param!r} not provided and not marked as optional."])
    return ok()


def multiple(functions: list[dict[str, Any]], output: list[dict[str, Any]],
             possible_answer: list[dict[str, Any]]) -> Verdict:
    if len(output) != len(possible_answer):
        return Verdict(False, "multiple_function_checker:wrong_count", ["Wrong number of functions."])
    expected = next(iter(possible_answer[0]))
    return simple(find_description(functions, expected), output[0], possible_answer[0])


def parallel_no_order(functions: list[dict[str, Any]], output: list[dict[str, Any]],
                      possible_answer: list[dict[str, Any]]) -> Verdict:
    if len(output) != len(possible_answer):
        return Verdict(False, "parallel_function_checker_no_order:wrong_count", ["Wrong number of functions."])
    matched: set[int] = set()
    for i, answer in enumerate(possible_answer):
        function = find_description(functions, next(iter(answer)))
        errors: list[Any] = []
        found = False
        for index, call in enumerate(output):
            if index in matched:
                continue
            result = simple(function, call, answer)
            if result.valid:
                matched.add(index)
                found = True
                break
            errors.append({index: (result.error_type, result.errors)})
        if not found:
            return Verdict(False, "parallel_function_checker_no_order:cannot_find_match",
                           [f"no output matches answer {i}", *errors])
    return ok()
