//! `jsonb` in and out: as typed-JSON text, or as the stored bytes.
//!
//! pgrx's own `JsonB` parses through serde and `expect`s success, which turns a deeply
//! nested input into an XX000 panic. [`TypedJsonb`] instead carries the text `jsonb_out`
//! prints, and docstore-core parses it with a proper error.
//!
//! [`StoredJsonb`] carries a document exactly as `entities` stores it, so a query that returns
//! documents unchanged passes them through without `jsonb_out` and `jsonb_in` per row.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::nullable::Nullable;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable,
};
use pgrx::{direct_function_call, direct_function_call_as_datum, pg_sys, FromDatum, IntoDatum};

use docstore_core::{typed_json, TypedJsonError, Value};

/// The text form of a `jsonb` datum (what `jsonb_out` prints).
#[derive(Debug, Clone)]
pub struct TypedJsonb(pub String);

impl TypedJsonb {
    /// Parse the text as a typed-JSON value.
    ///
    /// # Errors
    /// As [`typed_json::parse`].
    pub fn value(&self) -> Result<Value, TypedJsonError> {
        typed_json::parse(&self.0)
    }

    /// The typed-JSON text of `value`, ready to become a `jsonb` datum.
    pub fn from_value(value: &Value) -> Self {
        TypedJsonb(typed_json::to_string(value))
    }
}

impl FromDatum for TypedJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: the datum is a jsonb (the SQL signature says so); jsonb_out detoasts it
        // itself and returns a palloc'd C string that lives for the current memory context.
        let text =
            unsafe { direct_function_call::<&core::ffi::CStr>(pg_sys::jsonb_out, &[Some(datum)]) }?;
        // jsonb text is always valid UTF-8 in a UTF-8 database; lossy keeps us panic-free
        // otherwise, and the parser then reports the replacement character's context.
        Some(TypedJsonb(text.to_string_lossy().into_owned()))
    }
}

impl IntoDatum for TypedJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // Our printer never emits U+0000 (strings holding it are refused on input), so the
        // CString cannot fail; if it somehow did, return SQL NULL rather than panic.
        let cstring = std::ffi::CString::new(self.0).ok()?;
        // SAFETY: jsonb_in takes a NUL-terminated C string that outlives the call; it returns
        // a palloc'd jsonb datum or raises a Postgres ERROR (handled by pgrx's guard).
        unsafe { direct_function_call_as_datum(pg_sys::jsonb_in, &[Some(cstring.as_ptr().into())]) }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

/// The SQL type `jsonb` for a Rust type whose `IntoDatum` builds a jsonb datum in the current
/// memory context: how pgrx names it in SQL, and how a function returns it.
macro_rules! sql_jsonb {
    ($t:ty) => {
        // SAFETY: the type is passed and returned exactly as the SQL type `jsonb`.
        unsafe impl SqlTranslatable for $t {
            const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!($t);
            const TYPE_ORIGIN: pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin =
                pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin::External;
            const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
                Ok(SqlMappingRef::literal("jsonb"));
            const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
                Ok(ReturnsRef::One(SqlMappingRef::literal("jsonb")));
        }

        // SAFETY: the datum returned is a jsonb built in the current memory context, the
        // declared return type.
        unsafe impl BoxRet for $t {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
                match self.into_datum() {
                    // SAFETY: returned straight to the function manager, as box_into requires.
                    Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
                    None => fcinfo.return_null(),
                }
            }
        }
    };
}

sql_jsonb!(TypedJsonb);
sql_jsonb!(JsonbOut);
sql_jsonb!(DocumentJsonb);

/// A `jsonb` argument of a Rust type with a `FromDatum`; `$null` stands for SQL NULL, which
/// never arrives (docstore functions are STRICT).
macro_rules! jsonb_arg {
    ($t:ty, $null:expr) => {
        // SAFETY: arguments are unboxed through `FromDatum`, exactly as pgrx does for its own
        // varlena types.
        unsafe impl<'fcx> ArgAbi<'fcx> for $t {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                // SAFETY: the argument's type is jsonb per the SQL signature.
                unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| $null)
            }

            unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
                // SAFETY: as above.
                unsafe { arg.unbox_arg_using_from_datum() }.into()
            }
        }
    };
}

jsonb_arg!(TypedJsonb, TypedJsonb("null".to_owned()));
jsonb_arg!(
    DocumentJsonb,
    DocumentJsonb {
        text: TypedJsonb("null".to_owned()),
        datum: JsonbDatum(pg_sys::Datum::from(0usize)),
    }
);

/// A `jsonb` argument that is a document to write: its typed-JSON text, and the datum itself,
/// which the write may store as it is (valid for the function call that received it).
#[derive(Debug, Clone)]
pub struct DocumentJsonb {
    pub text: TypedJsonb,
    pub datum: JsonbDatum,
}

/// A `jsonb` datum passed on unchanged (as an SPI argument).
#[derive(Debug, Clone, Copy)]
pub struct JsonbDatum(pg_sys::Datum);

impl IntoDatum for JsonbDatum {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

impl FromDatum for DocumentJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        oid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: the datum is a jsonb varlena (the SQL signature says so); pg_detoast_datum
        // returns it, or a palloc'd plain copy in the call's memory context, so it stays valid
        // for the whole call and holds no pointer into another table's TOAST.
        let plain = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        let datum = pg_sys::Datum::from(plain);
        // SAFETY: as for TypedJsonb.
        let text = unsafe { TypedJsonb::from_polymorphic_datum(datum, false, oid) }?;
        Some(DocumentJsonb {
            text,
            datum: JsonbDatum(datum),
        })
    }
}

impl IntoDatum for DocumentJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        self.datum.into_datum()
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

/// A `jsonb` datum's bytes (a detoasted varlena, header included), copied out of the memory
/// context it was read in (SPI's is gone by the time a function returns).
#[derive(Debug, Clone)]
pub struct StoredJsonb(Vec<u8>);

impl StoredJsonb {
    /// A palloc'd copy in the current memory context, as a datum.
    fn to_datum(&self) -> pg_sys::Datum {
        // SAFETY: palloc raises a Postgres ERROR rather than return NULL; the copy is exactly
        // the length allocated, and the bytes are a complete varlena (see `from_polymorphic_datum`).
        unsafe {
            let ptr = pg_sys::palloc(self.0.len()).cast::<u8>();
            std::ptr::copy_nonoverlapping(self.0.as_ptr(), ptr, self.0.len());
            pg_sys::Datum::from(ptr)
        }
    }

    /// The bytes of the value without the varlena header (what two equal values share).
    pub fn payload(&self) -> &[u8] {
        self.0.get(pg_sys::VARHDRSZ..).unwrap_or_default()
    }

    /// The typed-JSON text (`jsonb_out`).
    pub fn text(&self) -> TypedJsonb {
        // SAFETY: the datum is a complete jsonb varlena; jsonb_out returns a palloc'd C string.
        let text = unsafe {
            direct_function_call::<&core::ffi::CStr>(pg_sys::jsonb_out, &[Some(self.to_datum())])
        };
        TypedJsonb(
            text.map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_else(|| "null".to_owned()),
        )
    }
}

impl FromDatum for StoredJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: the datum is a jsonb varlena (the column's type); pg_detoast_datum returns it
        // (or a palloc'd copy) with a 4-byte header (VARHDRSZ, which `payload` skips), whose
        // size covers the whole value.
        unsafe {
            let detoasted = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any(detoasted);
            Some(StoredJsonb(
                std::slice::from_raw_parts(detoasted.cast::<u8>(), len).to_vec(),
            ))
        }
    }
}

impl IntoDatum for StoredJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.to_datum())
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

/// A `jsonb` result: computed (typed-JSON text) or a stored document passed through.
#[derive(Debug, Clone)]
pub enum JsonbOut {
    Text(TypedJsonb),
    Stored(StoredJsonb),
}

impl IntoDatum for JsonbOut {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        match self {
            JsonbOut::Text(t) => t.into_datum(),
            JsonbOut::Stored(s) => s.into_datum(),
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}
