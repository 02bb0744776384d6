"""The contrast rules: a page that names the answer for something other than what the question asks makes the answer
red before the grader model is asked (raqa/reading/contrast.py)."""

from __future__ import annotations

import pytest

from raqa.reading.contrast import contrast

KILIMANJARO = (
    "Mount Kilimanjaro is a large dormant volcano in Tanzania. It is the highest mountain in Africa and the highest "
    "free-standing mountain above sea level in the world, at 5,895 m above sea level."
)
LAGERLOF = (
    "Selma Ottilia Lovisa Lagerlöf was a Swedish writer. She published her first novel, Gösta Berling's Saga, at the "
    "age of 33. She was the first woman to win the Nobel Prize in Literature, which she was awarded in 1909."
)
MELBOURNE = (
    "Melbourne is the capital and most populous city of the Australian state of Victoria and the second-most "
    "populous city in Australia."
)


@pytest.mark.parametrize(
    ("question", "text", "answer", "rule"),
    [
        # asked of the world, said only of a place: red
        ("What is the tallest mountain in the world?", KILIMANJARO, "Mount Kilimanjaro", "scope"),
        (
            "What is the tallest mountain in the world?",
            "Mount Elbrus is the highest mountain in Russia.",
            "Elbrus",
            "scope",
        ),
        (
            "What is the tallest mountain in the world?",
            "Aconcagua is a mountain in the Andes. With a summit of 6,961 metres, it is the highest mountain in the "
            "Americas.",
            "Aconcagua",
            "scope",
        ),
        (  # a plural ("the highest mountains on each of the seven continents") is not said of the answer
            "What is the tallest mountain in the world?",
            "Aconcagua is a mountain in the Andes. With a summit of 6,961 metres, it is the highest mountain in the "
            "Americas. It is one of the Seven Summits, the highest mountains on each of the seven continents.",
            "Aconcagua",
            "scope",
        ),
        (
            "Which is the biggest lake on Earth?",
            "Lake Victoria is Africa's largest lake by area.",
            "Lake Victoria",
            "scope",
        ),
        # said of the world too, with no place, or asked of the place itself: no contrast
        (
            "Which is the longest river in the world?",
            "The Nile is the longest river in Africa and the world.",
            "Nile",
            None,
        ),
        (
            "What is the tallest building in the world?",
            "Burj Khalifa is the tallest building in the Middle East, the tallest in the world.",
            "Burj Khalifa",
            None,
        ),
        (
            "What is the tallest mountain in the world?",
            "Mount Everest lies between Nepal and China. It is the highest mountain in Nepal. It is also the highest mountain in the world.",
            "Mount Everest",
            None,
        ),
        (
            "What was the largest naval battle in World War II?",
            "The Battle of Leyte Gulf was the largest naval battle of World War II.",
            "Battle of Leyte Gulf",
            None,
        ),
        ("What is the tallest mountain in the world?", "Mount Everest is Earth's highest mountain.", "Everest", None),
        (
            "What is the highest mountain in the world?",
            "Everest is Asia's highest mountain and the highest mountain on Earth.",
            "Everest",
            None,
        ),
        ("What is the highest mountain in Africa?", KILIMANJARO, "Mount Kilimanjaro", None),
        (
            "Which is the largest desert in the world?",
            "The Sahara is a desert. It is the largest hot desert.",
            "Sahara",
            None,
        ),
        (
            "Which is the fifth largest country in the world?",
            "Brazil is the largest country in South America.",
            "Brazil",
            None,
        ),
        # the capital of a region of another place: red; of another place, not said to be a region: left to the grader
        ("What is the capital of Australia?", MELBOURNE, "Melbourne", "capital"),
        (
            "What is the capital of Australia?",
            "Adelaide is the capital and largest city of South Australia.",
            "Adelaide",
            None,
        ),
        # correct answers whose sentences also name a region, another city's capital or a place differently
        (
            "What is the capital of Canada?",
            "Ottawa is the capital city of Canada, located in the province of Ontario.",
            "Ottawa",
            None,
        ),
        (
            "What is the capital of Bolivia?",
            "Sucre is the constitutional capital of Bolivia, the capital of the department of Chuquisaca.",
            "Sucre",
            None,
        ),
        (
            "What is the capital of Australia?",
            "Canberra was chosen as a compromise between Sydney and Melbourne, the capital of the state of Victoria.",
            "Canberra",
            None,
        ),
        (
            "What is the capital of Australia?",
            "Australia's capital is Canberra, and Sydney is the capital of the state of New South Wales.",
            "Canberra",
            None,
        ),
        (
            "What is the capital of the Canadian province of Ontario?",
            "Toronto is the capital city of the Canadian province of Ontario.",
            "Toronto",
            None,
        ),
        ("What is the capital of the Netherlands?", "Amsterdam is the capital of The Netherlands.", "Amsterdam", None),
        # the capital of the place asked, or the answer named as the capital: no contrast
        ("What is the capital of Australia?", "Canberra is the capital city of Australia.", "Canberra", None),
        (
            "What is the capital of the United States?",
            "Washington, D.C. is the capital city and federal district of the United States.",
            "Washington, D.C.",
            None,
        ),
        ("What is the capital of Fiji?", "Most Fijians live on the coasts, in the capital city of Suva.", "Suva", None),
        (
            "What is the capital of Kenya?",
            "Mombasa is a city in Kenya. It was the first capital of British East Africa, before Nairobi was made the "
            "capital in 1907. It now serves as the capital of Mombasa County.",
            "Nairobi",
            None,
        ),
        # the first only of a named kind, where the question names none: red (the subject named with more names)
        ("Who was the first woman to win a Nobel Prize?", LAGERLOF, "Selma Lagerlöf", "narrowed"),
        ("Who was the first woman to win the Nobel Prize in Literature?", LAGERLOF, "Selma Lagerlöf", None),
        (
            "What is the tallest mountain in the world?",
            "Puncak Jaya, with an elevation of 4,884 m, is the highest mountain peak of an island on Earth, and the "
            "highest peak in Indonesia.",
            "Puncak Jaya",
            "narrowed",
        ),
        (
            "What is the tallest mountain in the world?",
            "Mount Everest is the highest mountain on Earth, and the highest mountain of an Asian country.",
            "Mount Everest",
            None,
        ),
        (
            "Who was the first woman to win a Nobel Prize?",
            "Marie Curie was a physicist. She was the first woman to win a Nobel Prize, and the first person to win "
            "a Nobel Prize in Physics and in Chemistry.",
            "Marie Curie",
            None,
        ),
        (
            "Who was the first President of the United States?",
            "George Washington was the first president of the United States, from 1789 to 1797.",
            "George Washington",
            None,
        ),
        (
            "Who was the first person to walk on the Moon?",
            "Neil Armstrong was an astronaut. He was the first person to walk on the Moon in 1969.",
            "Neil Armstrong",
            None,
        ),
        # a lower rank than asked: red; the plain superlative said too: no contrast
        (
            "What is the longest river in Africa?",
            "The Zambezi is the fourth-longest river in Africa.",
            "Zambezi",
            "rank",
        ),
        (
            "What is the longest river?",
            "The Nile is the longest river, the second-longest river by flow.",
            "Nile",
            None,
        ),
    ],
)
def test_a_page_naming_the_answer_for_something_else_is_a_contrast(question, text, answer, rule) -> None:
    found = contrast(question, text, answer)
    assert (found.rule if found else None) == rule
    if found:
        assert found.says in text and found.says in found.note("z1", answer)


@pytest.mark.parametrize(
    ("question", "text", "answer"),
    [
        # the rank or place is said of another subject that names the answer
        (
            "What is the highest mountain in the world?",
            "K2 is the second-highest mountain on Earth, after Mount Everest.",
            "Mount Everest",
        ),
        (
            "What is the largest moon in the Solar System?",
            "Titan is the second-largest moon in the Solar System, after Ganymede.",
            "Ganymede",
        ),
        (
            "What is the tallest mountain in the world?",
            "Mount Kilimanjaro is the highest mountain in Africa, lower than Mount Everest.",
            "Mount Everest",
        ),
        # the capital of the place asked, said beside a region's
        (
            "What is the capital of Ecuador?",
            "Quito is the capital city of Ecuador and the capital of the province of Pichincha.",
            "Quito",
        ),
        (
            "What is the capital of Switzerland?",
            "Bern is Switzerland's capital and the capital of the canton of Bern.",
            "Bern",
        ),
        (
            "What is the capital of Canada?",
            "Ottawa is Canada's capital city of about one million people in the province of Ontario.",
            "Ottawa",
        ),
        # the first of a kind said of another subject that names the answer
        (
            "Who was the first woman to win a Nobel Prize?",
            "Selma Lagerlöf was the first woman to win the Nobel Prize in Literature, eight years after Marie Curie.",
            "Marie Curie",
        ),
        # said of the world a few words on
        (
            "What is the tallest building in the world?",
            "Burj Khalifa is the tallest building in Dubai and the tallest structure and building in the world.",
            "Burj Khalifa",
        ),
    ],
)
def test_correct_answers_on_such_pages_are_left_to_the_grader(question, text, answer) -> None:
    assert contrast(question, text, answer) is None
