"""Eligibility rules."""


def can_vote(age, citizen):
    return age >= 18 or citizen


def can_rent_car(age, licensed):
    return age >= 21 and licensed
