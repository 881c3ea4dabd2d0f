import { invalid, noContent, TAG_NAME, unreadable } from "./audience";
import { apiOperation, errorAnswer, idempotentCreate, jsonAnswer, schemaRef } from "./common";
import type { ApiArea } from "./types";

export const tagsArea: ApiArea = {
  tag: { name: "Tags", description: "The organization's tags, with how many subscribers have each." },
  paths: {
    "/api/v1/tags": {
      get: apiOperation({
        operationId: "listTags",
        summary: "List tags",
        description:
          "The organization's tags, by name, with their subscriber counts. A cheap authenticated call for reading the rate-limit headers: answered with the admission, in one round trip to the rate limiter.",
        tags: ["Tags"],
        responses: {
          "200": jsonAnswer("The tags.", {
            type: "object",
            required: ["data"],
            properties: { data: { type: "array", items: schemaRef("TagCount") } },
          }),
        },
      }),
      post: apiOperation(
        idempotentCreate({
          operationId: "createTag",
          summary: "Create a tag",
          tags: ["Tags"],
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["name"],
                  properties: { name: TAG_NAME },
                  additionalProperties: false,
                },
              },
            },
          },
          responses: {
            "200": jsonAnswer("The organization had the tag already.", schemaRef("Tag")),
            "201": jsonAnswer("Created.", schemaRef("Tag")),
            "422": invalid,
            ...unreadable,
          },
        }),
      ),
    },
    "/api/v1/tags/{name}": {
      delete: apiOperation({
        operationId: "deleteTag",
        summary: "Delete a tag",
        description: "Also takes it off every subscriber.",
        tags: ["Tags"],
        parameters: [
          {
            name: "name",
            in: "path",
            required: true,
            description: "The tag's name, percent-encoded.",
            schema: { type: "string" },
            example: "newsletter",
          },
        ],
        responses: {
          "204": noContent("Deleted."),
          "404": errorAnswer("No such tag in this organization.", ["NOT_FOUND"]),
        },
      }),
    },
  },
  schemas: {
    Tag: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
    TagCount: {
      type: "object",
      required: ["name", "subscribers"],
      properties: {
        name: { type: "string" },
        subscribers: { type: "integer", minimum: 0, description: "How many subscribers have the tag." },
      },
    },
  },
};
